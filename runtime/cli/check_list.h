// CheckList: the named pass/fail results of `accel test`, logged where they fail and merged across
// ranks, so that every rank reaches the same verdict.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

class Communicator;

class CheckList {
 public:
  // Failures are written to log as "accel test: rank R: NAME: PROBLEM".
  CheckList(int rank, std::ostream& log);

  // Records one check: passed when problem is empty.
  void record(const std::string& name, const std::string& problem);
  // Runs one check: f returns its problem ("" when it passed); an exception it throws is the problem.
  void run(const std::string& name, const std::function<std::string()>& f);

  int size() const { return static_cast<int>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  bool failed_here(int index) const { return failed_[static_cast<size_t>(index)]; }

  // The names of the checks that failed on any rank, in run order; the same on every rank. Collective
  // over comm (null: one process, no exchange). Throws accel::Error when the ranks ran different
  // numbers of checks, since their lists could then not be matched.
  std::vector<std::string> failed_anywhere(Communicator* comm) const;

 private:
  int rank_;
  std::ostream& log_;
  std::vector<std::string> names_;
  std::vector<bool> failed_;
};

}  // namespace accel
