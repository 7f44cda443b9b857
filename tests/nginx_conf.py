"""The nginx configuration the integration tests and `make bench` run
Debian's nginx with: everything under one prefix directory, no daemon, one
server block on 127.0.0.1. Standard library only, so the benchmark can use
it without pytest.
SPDX-License-Identifier: MIT
"""


# Debian packages the stream module on its own (libnginx-mod-stream).
STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


def nginx_conf(prefix, listen=None, server="", http="", log_format="$request", workers=1,
               stream=""):
    """The text of nginx.conf. listen: "127.0.0.1:PORT" for the server block's
    listen line (none when None); server: the rest of that block; http: extra
    http-level directives (further server blocks, or "access_log off;", which
    cancels the access log below). The access log uses log_format (nginx
    variables), one line per request, in PREFIX/logs/access.log. stream: the
    body of a stream block (TCP and TLS proxying), which loads its module."""
    listen_line = f"listen {listen};" if listen else ""
    # A server block with no listen line listens on *:80: without a listen
    # line or directives of its own (a stream-only nginx) there is none.
    server_block = f"server {{\n        {listen_line}\n        {server}\n    }}" \
        if listen or server.strip() else ""
    stream_block = f"stream {{ {stream} }}" if stream else ""
    load = f"load_module {STREAM_MODULE};" if stream else ""
    return f"""
{load}
worker_processes {workers};
worker_rlimit_nofile 30000;
error_log {prefix}/logs/error.log warn;
pid {prefix}/nginx.pid;
daemon off;
master_process on;
user root;
events {{ worker_connections 25000; }}
http {{
    log_format t '{log_format}';
    access_log {prefix}/logs/access.log t buffer=64k flush=100ms;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    keepalive_requests 1000000;
    {http}
    {server_block}
}}
{stream_block}
"""
