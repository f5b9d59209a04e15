#pragma once
// Drives one coroutine to completion on a fresh io_context, for tests. A hang fails the test
// (an exception after `limit`) instead of stalling the suite; exceptions propagate.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

namespace sandfort::testing {

template <typename T>
T run_coroutine(boost::asio::awaitable<T> work, std::chrono::seconds limit = std::chrono::seconds(120)) {
  boost::asio::io_context ioc;
  std::optional<T> out;
  boost::asio::co_spawn(
      ioc, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(work)); },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ioc.run_for(limit);
  if (!out) throw std::runtime_error("the coroutine did not finish within " + std::to_string(limit.count()) + " s");
  return std::move(*out);
}

// The same on an io_context the test made (whose objects the coroutine uses); it is restarted
// first, so it may be driven again afterwards.
template <typename T>
T run_coroutine(boost::asio::io_context& ioc, boost::asio::awaitable<T> work,
                std::chrono::seconds limit = std::chrono::seconds(120)) {
  std::optional<T> out;
  std::exception_ptr failure;
  boost::asio::co_spawn(
      ioc, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(work)); },
      [&](std::exception_ptr e) {
        failure = e;
        ioc.stop();
      });
  ioc.restart();
  ioc.run_for(limit);
  if (failure) std::rethrow_exception(failure);
  if (!out) throw std::runtime_error("the coroutine did not finish within " + std::to_string(limit.count()) + " s");
  return std::move(*out);
}

}  // namespace sandfort::testing
