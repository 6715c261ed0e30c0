# Reduces D-Bus introspection XML to one sorted-comparable line per member of
# the interface named by -v IFACE: "method Name(in s,out o)", "signal
# Name(s,o)", "property Name type access". Annotations and comments are
# left out. Expects one element per line (as sd-bus and dbus/*.xml write).
function attr(a) {
	if (match($0, a "=\"[^\"]*\"")) return substr($0, RSTART + length(a) + 2, RLENGTH - length(a) - 3)
	return ""
}
/<interface / { inif = attr("name") == IFACE; next }
/<\/interface>/ { inif = 0; next }
!inif { next }
/<(method|signal) / {
	kind = $0 ~ /<method/ ? "method" : "signal"
	cur = kind " " attr("name"); args = ""
	if ($0 ~ /\/>/) print cur "()"
	next
}
/<arg / {
	d = kind == "method" ? (attr("direction") == "" ? "in" : attr("direction")) " " : ""
	args = args (args == "" ? "" : ",") d attr("type")
	next
}
/<\/(method|signal)>/ { print cur "(" args ")"; next }
/<property / { print "property " attr("name") " " attr("type") " " attr("access") }
