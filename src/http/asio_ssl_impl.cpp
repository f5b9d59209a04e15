// Asio's TLS layer compiled once for the daemon's targets (sandfort_asio compiles the rest of
// Asio and Beast, not ssl); a separate library so only TLS users link OpenSSL's libssl.
#include <boost/asio/ssl/impl/src.hpp>
