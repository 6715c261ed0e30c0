# A plain HTTP object store for http:// backend tests: nginx-light with
# WebDAV PUT/DELETE/MOVE, under $TL_DIR (source tests/lib/lib.sh first).

nginx_install() {
	command -v nginx >/dev/null && return 0
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light >/dev/null; }
}

# nginx_start PORT [TOKEN]: serves $TL_DIR/www on 127.0.0.1:PORT (or
# $NGINX_ADDR:PORT); with TOKEN,
# only requests carrying "Authorization: Bearer TOKEN". NGINX_LOCATION_EXTRA:
# more directives for the store's location.
nginx_start() {
	local port=$1 token=${2:-} d=$TL_DIR/nginx auth=""
	mkdir -p "$d/tmp" "$TL_DIR/www"
	[ -n "$token" ] && auth="if (\$http_authorization !~ \"^Bearer ($token)\$\") { return 401; }"
	cat >"$d/nginx.conf" <<-CONF
	user root;
	worker_processes 1;
	pid $d/nginx.pid;
	error_log $d/error.log;
	events { worker_connections 64; }
	http {
	  # combined, then which connection carried it (c=) and when it ended
	  # (t=, seconds) and took (d=): transfers side by side are on two
	  # connections, their times overlapping
	  log_format tl '\$remote_addr - \$remote_user [\$time_local] "\$request" \$status \$body_bytes_sent '
	                '"\$http_referer" "\$http_user_agent" c=\$connection t=\$msec d=\$request_time';
	  access_log $d/access.log tl;
	  client_body_temp_path $d/tmp;
	  proxy_temp_path $d/tmp; fastcgi_temp_path $d/tmp; uwsgi_temp_path $d/tmp; scgi_temp_path $d/tmp;
	  client_max_body_size 0;
	  server {
	    listen ${NGINX_ADDR:-127.0.0.1}:$port;
	    root $TL_DIR/www;
	    location / {
	      $auth
	      ${NGINX_LOCATION_EXTRA:-}
	      dav_methods PUT DELETE MOVE;
	      create_full_put_path on;
	    }
	  }
	}
	CONF
	nginx -c "$d/nginx.conf" || return 1
	for _ in $(seq 50); do [ -s "$d/nginx.pid" ] && break; sleep 0.1; done
	TL_PIDS+=("$(cat "$d/nginx.pid")")
}

# nginx_set_token PORT TOKENS: from now on only "Authorization: Bearer T"
# for T in TOKENS (a regex alternation: "old|new" while a token rotates);
# returns once nginx's old workers, which keep the old rule for the
# connections they hold, are gone.
nginx_set_token() {
	local port=$1 tokens=$2 d=$TL_DIR/nginx master
	master=$(cat "$d/nginx.pid")
	sed -i "s#if (\$http_authorization !~ \"^Bearer ([^)]*)\$\")#if (\$http_authorization !~ \"^Bearer ($tokens)\$\")#" "$d/nginx.conf"
	grep -qF "^Bearer ($tokens)\$" "$d/nginx.conf" || return 1
	nginx -c "$d/nginx.conf" -s reload 2>/dev/null || return 1
	# A reload starts new workers and lets the old ones finish: wait until
	# the master's workers are all of the new generation (one, as started).
	sleep 0.2
	for _ in $(seq 100); do
		[ "$(pgrep -c -P "$master")" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}
