// volley-h2c: a cleartext HTTP/2 (h2c, prior knowledge) server made of Go's
// standard library alone, for volley's tests: a second, independent HTTP/2
// implementation beside nginx and nghttpd. It answers every request with 200
// and "Hello world\n" and records what it saw. With --cert it serves TLS
// instead, HTTP/2 and HTTP/1.1 as ALPN chooses; with --alternate too, it
// offers each new connection in turn only h2, then only http/1.1, so that a
// client offering both speaks each on every other connection.
//
// Usage: volley-h2c [--listen 127.0.0.1:0] [--stats FILE] [--max-streams N]
//
//	[--max-time SECONDS] [--cert FILE --key FILE [--alternate]]
//
// Once listening it prints "port N" on stdout. SIGTERM or SIGINT (and
// --max-time, default 300) write the stats and exit 0. The stats JSON:
//
//	connections          connections accepted
//	requests             requests answered
//	protocols            {"HTTP/2.0": n}: r.Proto of each request
//	methods, paths       {"GET": n}, {"/x": n} (path without the query)
//	body_bytes_in        request body bytes read
//	streams_per_connection  requests of each connection, in accept order
//	max_concurrent       most requests in progress at once on one connection
//	connection_protocols {"HTTP/2.0": n}: connections that made a request, by
//	                     the protocol of their requests
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
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type connKey struct{}

// conn is what the server knows of one connection.
type conn struct {
	requests, active, maxActive int
	proto                       string // of its first request
}

type stats struct {
	mu          sync.Mutex
	conns       []*conn
	requests    int
	protocols   map[string]int
	methods     map[string]int
	paths       map[string]int
	bodyBytesIn int64
}

func (s *stats) newConn() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &conn{}
	s.conns = append(s.conns, c)
	return c
}

// begin counts a request in progress on c; end counts it done.
func (s *stats) begin(c *conn, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.active++
	if c.proto == "" {
		c.proto = r.Proto
	}
	if c.active > c.maxActive {
		c.maxActive = c.active
	}
	s.protocols[r.Proto]++
	s.methods[r.Method]++
	s.paths[r.URL.Path]++
}

func (s *stats) end(c *conn, body int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.active--
	c.requests++
	s.requests++
	s.bodyBytesIn += body
}

func (s *stats) write(path string) error {
	s.mu.Lock()
	perConn := make([]int, len(s.conns))
	maxConcurrent := 0
	byProto := map[string]int{}
	for i, c := range s.conns {
		perConn[i] = c.requests
		maxConcurrent = max(maxConcurrent, c.maxActive)
		if c.proto != "" {
			byProto[c.proto]++
		}
	}
	doc, err := json.Marshal(map[string]any{
		"connections":            len(s.conns),
		"requests":               s.requests,
		"protocols":              s.protocols,
		"methods":                s.methods,
		"paths":                  s.paths,
		"body_bytes_in":          s.bodyBytesIn,
		"streams_per_connection": perConn,
		"max_concurrent":         maxConcurrent,
		"connection_protocols":   byProto,
	})
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", append(doc, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "volley-h2c: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	statsPath := flag.String("stats", "", "write the stats JSON here at exit")
	maxStreams := flag.Int("max-streams", 0, "SETTINGS_MAX_CONCURRENT_STREAMS (0: Go's default)")
	maxTime := flag.Float64("max-time", 300, "exit after this many seconds")
	certFile := flag.String("cert", "", "serve TLS with this certificate (PEM)")
	keyFile := flag.String("key", "", "the certificate's private key (PEM)")
	alternate := flag.Bool("alternate", false, "with --cert: offer connections h2, then http/1.1, in turn")
	flag.Parse()

	st := &stats{protocols: map[string]int{}, methods: map[string]int{}, paths: map[string]int{}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(connKey{}).(*conn)
		st.begin(c, r)
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Hello world\n")
		st.end(c, n)
	})
	// Cleartext HTTP/2 with prior knowledge only: HTTP/1.1 is refused. Over
	// TLS, whichever ALPN chose.
	var protocols http.Protocols
	if *certFile == "" {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
	}
	srv := &http.Server{
		Handler:   handler,
		Protocols: &protocols,
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: *maxStreams},
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, st.newConn())
		},
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fail("%s: %v", *certFile, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert},
			NextProtos: []string{"h2", "http/1.1"}}
		var handshakes atomic.Int64
		if *alternate {
			base := srv.TLSConfig.Clone()
			srv.TLSConfig.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
				c := base.Clone()
				if handshakes.Add(1)%2 == 1 {
					c.NextProtos = []string{"h2"}
				} else {
					c.NextProtos = []string{"http/1.1"}
				}
				return c, nil
			}
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail("%s: %v", *listen, err)
	}
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-stop:
		case <-time.After(time.Duration(*maxTime * float64(time.Second))):
		}
		if *statsPath != "" {
			if err := st.write(*statsPath); err != nil {
				fail("%s: %v", *statsPath, err)
			}
		}
		os.Exit(0)
	}()
	if *certFile != "" {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil {
		fail("serve: %v", err)
	}
}
