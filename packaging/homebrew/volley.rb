# volley's Homebrew formula. The test runs the installed volley against
# Python's http.server on 127.0.0.1 and checks the report and --json.
# sha256: of the release tarball (`make dist`), written by `make pkg-sums`.
# SPDX-License-Identifier: MIT
class Volley < Formula
  include Language::Python::Shebang

  desc "Scriptable HTTP benchmarking tool, a drop-in replacement for wrk"
  homepage "https://github.com/volley-bench/volley"
  url "https://github.com/volley-bench/volley/releases/download/v0.2.0/volley-0.2.0.tar.gz"
  sha256 "9814b2c9337f3d08f90f7d3dc872843dcc1eb3327665f33676a298a1700a50a7"
  license "MIT"

  depends_on "pkgconf" => :build
  depends_on "gnutls"
  depends_on "libev"
  depends_on "libnghttp2"
  depends_on "libnghttp3"
  depends_on "libngtcp2"
  depends_on "luajit"
  depends_on "openssl@3"
  depends_on "snappy"
  depends_on "python@3.12"

  on_linux do
    depends_on "liburing"
  end

  def install
    system "make", "PKG_CONFIG_PATH=#{Formula["openssl@3"].opt_lib}/pkgconfig",
           "EV_CFLAGS=-I#{Formula["libev"].opt_include}",
           "EV_LIBS=-L#{Formula["libev"].opt_lib} -lev"
    system "make", "install", "PREFIX=#{prefix}", "DOCDIR=#{doc}"
    rewrite_shebang detected_python_shebang, bin/"volley-sweep", bin/"volley-plot",
                    bin/"volley-kube", bin/"volley-report"
  end

  test do
    assert_match "volley #{version} ", shell_output("#{bin}/volley --version")
    assert_match "usage: volley-sweep", shell_output("#{bin}/volley-sweep --help")
    assert_match "usage: volley-plot", shell_output("#{bin}/volley-plot --help")
    assert_match "usage: volley-report", shell_output("#{bin}/volley-report --help")

    port = free_port
    server = fork do
      exec Formula["python@3.12"].opt_bin/"python3.12", "-m", "http.server",
           "--bind", "127.0.0.1", port.to_s, "--directory", testpath
    end
    sleep 2
    (testpath/"index.html").write "hello\n"
    report = shell_output("#{bin}/volley -t1 -c1 -n 20 --json #{testpath}/r.json " \
                          "http://127.0.0.1:#{port}/index.html")
    assert_match "20 requests in ", report
    assert_match '"requests": 20', (testpath/"r.json").read
  ensure
    Process.kill("TERM", server) if server
  end
end
