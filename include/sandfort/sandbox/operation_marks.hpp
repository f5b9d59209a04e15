#pragma once
// Operation marks: while the lifecycle works on a sandbox's container (stop, delete, pause, a
// snapshot's commit), the events it causes are its own. Whoever judges Docker's events (the
// reconciler, container_events.cpp) keeps the marks; a part that works on a container holds one
// for as long as it works, and depends on this header only.

#include <map>
#include <memory>
#include <string>

namespace sandfort::sandbox {

class operation_marks {
 public:
  // One operation on a sandbox's container, until it is destroyed. Neither copied nor moved (a
  // copy would end the operation twice).
  class mark {
   public:
    mark(operation_marks& owner, std::string sandbox_id);
    mark(const mark&) = delete;
    mark& operator=(const mark&) = delete;
    ~mark();

   private:
    operation_marks& owner_;
    std::string sandbox_id_;
    // A suspended operation may be destroyed with the io_context after its owner is gone.
    std::shared_ptr<const bool> owner_alive_;
  };
  mark begin_operation(const std::string& sandbox_id) { return mark(*this, sandbox_id); }

  // Whether a mark on the sandbox is held now.
  bool in_operation(const std::string& sandbox_id) const { return in_operation_.contains(sandbox_id); }

  virtual ~operation_marks() { *alive_ = false; }
  operation_marks(const operation_marks&) = delete;
  operation_marks& operator=(const operation_marks&) = delete;

 protected:
  operation_marks() = default;
  // The last mark on the sandbox is gone.
  virtual void operations_ended(const std::string& sandbox_id) = 0;

 private:
  std::map<std::string, int> in_operation_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sandfort::sandbox
