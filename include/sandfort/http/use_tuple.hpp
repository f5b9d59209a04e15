#pragma once
// The completion token of every coroutine in the project: `auto [ec, n] = co_await op(use_tuple)`
// gives the error as a value instead of an exception.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandfort {

inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace sandfort
