// Asio's TLS layer compiled once (sandfort_asio compiles the rest of Asio and Beast, not ssl).
#include <boost/asio/ssl/impl/src.hpp>
