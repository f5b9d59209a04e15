#include "sandfort/api/background_reader.hpp"

namespace sandfort::api {

result<std::unique_ptr<background_reader>> background_reader::open(const std::string& database_path,
                                                                   std::size_t max_waiting) {
  auto db = store::database::open(database_path);
  if (!db) return std::move(db).err();
  return std::unique_ptr<background_reader>(new background_reader(std::move(*db), max_waiting));
}

background_reader::background_reader(std::unique_ptr<store::database> db, std::size_t max_waiting)
    : db_(std::move(db)), max_in_flight_(max_waiting) {}

background_reader::~background_reader() { thread_.join(); }

}  // namespace sandfort::api
