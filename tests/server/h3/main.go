// volley-h3: an HTTP/3 server made of quic-go (github.com/quic-go/quic-go,
// its http3 package), for volley's tests and make bench: a real HTTP/3 and
// QUIC implementation other than the ngtcp2 and nghttp3 volley is made of.
// It answers every request with 200 and "Hello world\n" (or --body-size
// bytes of it), with volley-testd's routes: "/authenticate" adds
// "X-Token: volley-token-1"; "/resource" answers 401 unless the request
// carries that token. It records what it saw.
//
// Usage: volley-h3 --cert FILE --key FILE [--listen 127.0.0.1:0]
//
//	[--stats FILE] [--log FILE] [--max-streams N] [--delay MS]
//	[--body-size N] [--max-time SECONDS] [--tcp]
//
// Once listening it prints "port N" on stdout. SIGTERM or SIGINT (and
// --max-time, default 300) write the stats and exit 0. --max-streams N: the
// bidirectional streams a connection may have open at once (quic-go's
// default is 100; 0 allows none). --tcp: the same server over TLS on TCP
// too, at the same port (Go's net/http: HTTP/2, or HTTP/1.1), to measure
// other protocols against one server. --log FILE: one JSON object per line for
// every request answered, written before the response goes out and flushed
// at once (a server killed mid-run leaves the requests it answered):
//
//	{"conn": 1, "peer": "127.0.0.1:40000", "method": "GET", "target": "/x?y", "version": "HTTP/3.0",
//	 "headers": [["Host", "a"], ...], "body": "..."}
//
// The stats JSON:
//
//	connections          connections accepted (handshake done)
//	requests             requests answered
//	used_0rtt            connections whose client sent 0-RTT data it took
//	resumed              connections that resumed a TLS session
//	protocols            {"HTTP/3.0": n}: r.Proto of each request
//	methods, paths       {"GET": n}, {"/x": n} (path without the query)
//	body_bytes_in        request body bytes read
//	streams_per_connection  requests of each connection, in accept order
//	max_concurrent       most requests in progress at once on one connection
//
// SPDX-License-Identifier: MIT
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

const token = "volley-token-1"

type connKey struct{}

// conn is what the server knows of one connection.
type conn struct {
	id                          int
	requests, active, maxActive int
}

type stats struct {
	mu          sync.Mutex
	conns       []*conn
	requests    int
	used0RTT    int
	resumed     int
	protocols   map[string]int
	methods     map[string]int
	paths       map[string]int
	bodyBytesIn int64
	log         *os.File
}

func (s *stats) newConn(qc *quic.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &conn{id: len(s.conns) + 1}
	s.conns = append(s.conns, c)
	state := qc.ConnectionState()
	if state.Used0RTT {
		s.used0RTT++
	}
	if state.TLS.DidResume {
		s.resumed++
	}
	return c
}

// begin counts a request in progress on c; end counts it answered.
func (s *stats) begin(c *conn, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.active++
	if c.active > c.maxActive {
		c.maxActive = c.active
	}
	s.protocols[r.Proto]++
	s.methods[r.Method]++
	s.paths[r.URL.Path]++
}

func (s *stats) end(c *conn, r *http.Request, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.active--
	c.requests++
	s.requests++
	s.bodyBytesIn += int64(len(body))
	if s.log == nil {
		return
	}
	headers := [][2]string{{"Host", r.Host}}
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range r.Header[name] {
			headers = append(headers, [2]string{name, v})
		}
	}
	line, _ := json.Marshal(map[string]any{
		"conn": c.id, "peer": r.RemoteAddr, "method": r.Method, "target": r.URL.RequestURI(),
		"version": r.Proto, "headers": headers, "body": string(body),
	})
	s.log.Write(append(line, '\n'))
}

func (s *stats) write(path string) {
	if path == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	perConn := make([]int, len(s.conns))
	maxConcurrent := 0
	for i, c := range s.conns {
		perConn[i] = c.requests
		if c.maxActive > maxConcurrent {
			maxConcurrent = c.maxActive
		}
	}
	data, _ := json.Marshal(map[string]any{
		"connections":            len(s.conns),
		"requests":               s.requests,
		"used_0rtt":              s.used0RTT,
		"resumed":                s.resumed,
		"protocols":              s.protocols,
		"methods":                s.methods,
		"paths":                  s.paths,
		"body_bytes_in":          s.bodyBytesIn,
		"streams_per_connection": perConn,
		"max_concurrent":         maxConcurrent,
	})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err == nil {
		os.Rename(tmp, path)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "volley-h3: "+format+"\n", args...)
	os.Exit(1)
}

// responseBody is n bytes of "Hello world\n" repeated.
func responseBody(n int) []byte {
	const hello = "Hello world\n"
	b := make([]byte, n)
	for i := range b {
		b[i] = hello[i%len(hello)]
	}
	return b
}

func handler(s *stats, delay time.Duration, body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*conn)
		if c == nil {
			c = &conn{}
		}
		s.begin(c, r)
		in, _ := io.ReadAll(r.Body)
		if delay > 0 {
			time.Sleep(delay)
		}
		s.end(c, r, in)
		switch {
		case r.URL.Path == "/authenticate":
			w.Header().Set("X-Token", token)
		case r.URL.Path == "/resource" && r.Header.Get("X-Token") != token:
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}

// bind binds the UDP address and, with tcp, the TCP port of the same
// number: on port 0, ports until one is free for both.
func bind(addr string, tcp bool) (net.PacketConn, net.Listener, error) {
	for try := 0; ; try++ {
		udp, err := net.ListenPacket("udp", addr)
		if err != nil || !tcp {
			return udp, nil, err
		}
		ln, err := net.Listen("tcp", udp.LocalAddr().String())
		if err == nil {
			return udp, ln, nil
		}
		udp.Close()
		if !strings.HasSuffix(addr, ":0") || try == 20 {
			return nil, nil, fmt.Errorf("--tcp: %v", err)
		}
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "UDP address")
	certFile := flag.String("cert", "", "certificate, PEM")
	keyFile := flag.String("key", "", "private key, PEM")
	statsFile := flag.String("stats", "", "stats JSON, written at exit")
	logFile := flag.String("log", "", "a JSON line per request answered")
	maxStreams := flag.Int64("max-streams", 100, "bidirectional streams open at once per connection")
	delayMs := flag.Float64("delay", 0, "milliseconds before each response")
	bodySize := flag.Int("body-size", 12, "response body bytes")
	maxTime := flag.Float64("max-time", 300, "seconds before exiting")
	tcp := flag.Bool("tcp", false, "serve HTTPS (HTTP/2, HTTP/1.1) on TCP at the same port too")
	flag.Parse()
	if *certFile == "" || *keyFile == "" {
		fail("--cert and --key are needed")
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fail("%v", err)
	}
	s := &stats{protocols: map[string]int{}, methods: map[string]int{}, paths: map[string]int{}}
	if *logFile != "" {
		if s.log, err = os.Create(*logFile); err != nil {
			fail("%v", err)
		}
	}
	udp, tcpLn, err := bind(*listen, *tcp)
	if err != nil {
		fail("%v", err)
	}
	streams := *maxStreams
	if streams == 0 {
		streams = -1 // quic-go: no stream at all
	}
	server := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		QUICConfig: &quic.Config{
			MaxIncomingStreams: streams,
			Allow0RTT:          true,
			MaxIdleTimeout:     30 * time.Second,
		},
		Handler: handler(s, time.Duration(*delayMs*float64(time.Millisecond)),
			responseBody(*bodySize)),
		ConnContext: func(ctx context.Context, qc *quic.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, s.newConn(qc))
		},
	}
	addr := udp.LocalAddr().String()
	if tcpLn != nil {
		https := &http.Server{Handler: server.Handler, TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}}
		go https.ServeTLS(tcpLn, "", "")
	}
	fmt.Printf("port %s\n", addr[strings.LastIndex(addr, ":")+1:])
	os.Stdout.Sync()

	done := make(chan struct{})
	go func() {
		server.Serve(udp)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case <-time.After(time.Duration(*maxTime * float64(time.Second))):
	case <-done:
	}
	server.Close()
	s.write(*statsFile)
}
