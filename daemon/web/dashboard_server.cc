#include "daemon/web/dashboard_server.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <spdlog/spdlog.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace xv::daemon::web {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

constexpr auto kIoTimeout = std::chrono::seconds(30);
constexpr std::uint32_t kHeaderLimit = 16 * 1024;
constexpr std::uint64_t kBodyLimit = 64 * 1024;

// One connection: read a request, answer it, repeat while the client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpHandler* router)
      : stream_(std::move(socket)), router_(router) {}

  void Run() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kBodyLimit);
    stream_.expires_after(kIoTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream) return Close();
    if (ec) {
      if (ec != beast::error::timeout && ec != net::error::operation_aborted) {
        spdlog::debug("dashboard: read: {}", ec.message());
      }
      return Close();
    }
    const http::request<http::string_body>& req = parser_->get();
    HttpRequestHead head;
    head.method = std::string(req.method_string());
    head.target = std::string(req.target());
    head.host = std::string(req[http::field::host]);
    HttpReply reply;
    try {
      reply = router_->Handle(head);
    } catch (const std::exception& e) {
      spdlog::error("dashboard: {} {}: {}", head.method, head.target, e.what());
      reply = HttpReply();
      reply.status = 500;
      reply.content_type = "text/plain; charset=utf-8";
      reply.body = "internal error\n";
    }
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(req.version());
    res->result(static_cast<unsigned>(reply.status));
    res->set(http::field::server, "xvd");
    res->set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) res->set(name, value);
    res->keep_alive(req.keep_alive());
    res->content_length(reply.body.size());
    if (req.method() != http::verb::head) res->body() = std::move(reply.body);
    stream_.expires_after(kIoTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code wec, std::size_t) {
                        self->OnWrite(res->keep_alive(), wec);
                      });
  }

  void OnWrite(bool keep_alive, beast::error_code ec) {
    if (ec || !keep_alive) return Close();
    Read();
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpHandler* router_;
};

}  // namespace

struct DashboardServer::Impl {
  explicit Impl(int threads) : ioc(threads), acceptor(net::make_strand(ioc)) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
        spdlog::warn("dashboard: accept: {}", ec.message());
      } else {
        std::make_shared<Session>(std::move(socket), router)->Run();
      }
      Accept();
    });
  }

  net::io_context ioc;
  tcp::acceptor acceptor;
  HttpHandler* router = nullptr;
};

Status DashboardServer::Start(const std::string& host, int port, int threads, HttpHandler* router,
                              std::unique_ptr<DashboardServer>* out, const std::string& flag) {
  const std::string where = host + ":" + std::to_string(port);
  std::string ip = host;
  if (host == "localhost") ip = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    ip = host.substr(1, host.size() - 2);
  }
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(ip, ec);
  if (ec) return Status::InvalidArgument(flag + " " + where + ": not an IP address");
  std::unique_ptr<DashboardServer> s(new DashboardServer());
  s->impl_ = std::make_unique<Impl>(threads);
  s->impl_->router = router;
  tcp::acceptor& a = s->impl_->acceptor;
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable(flag + " " + where + ": cannot listen: " + ec.message() +
                               " (another xvd? choose a port with " + flag + " HOST:PORT, or " +
                               flag + " off)");
  }
  s->port_ = a.local_endpoint().port();
  s->impl_->Accept();
  for (int i = 0; i < std::max(1, threads); ++i) {
    s->threads_.emplace_back([impl = s->impl_.get()] { impl->ioc.run(); });
  }
  *out = std::move(s);
  return Status::Ok();
}

DashboardServer::~DashboardServer() { Stop(); }

void DashboardServer::Stop() {
  if (!impl_) return;
  impl_->ioc.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  impl_.reset();  // closes the listener; destroys the pending sessions, closing their sockets
}

}  // namespace xv::daemon::web
