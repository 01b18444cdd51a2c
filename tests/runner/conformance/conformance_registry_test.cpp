// abi/CONFORMANCE.md and the runner's clause registry must list the same clauses, with the
// same titles, in the same order: the document is what runtime vendors read, the registry
// is what runs.
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runner/conformance/conformance.hpp"

namespace {

struct DocClause {
  std::string id, title;
};

// The clause rows of the document: "| GROUP.N | title | requirement | check | needs |".
std::vector<DocClause> document_clauses() {
  std::ifstream in(CALRT_CONFORMANCE_MD);
  EXPECT_TRUE(in) << CALRT_CONFORMANCE_MD;
  const std::regex row(R"(^\| ([A-Z]+\.[0-9]+) \| ([^|]+?) \|)");
  std::vector<DocClause> clauses;
  std::string line;
  std::smatch match;
  while (std::getline(in, line)) {
    if (std::regex_search(line, match, row)) {
      clauses.push_back({match[1], match[2]});
    }
  }
  return clauses;
}

TEST(ConformanceRegistry, MatchesTheDocument) {
  const std::vector<DocClause> doc = document_clauses();
  const std::vector<runner::Clause>& registry = runner::conformance_clauses();
  ASSERT_GE(doc.size(), 40u);
  ASSERT_EQ(doc.size(), registry.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_EQ(doc[i].id, registry[i].id) << "clause " << i;
    EXPECT_EQ(doc[i].title, registry[i].title) << doc[i].id;
    EXPECT_EQ(registry[i].id.substr(0, registry[i].id.find('.')), registry[i].group);
    EXPECT_TRUE(registry[i].check) << registry[i].id << " has no check";
    // ": " separates a title from the reason on a FAIL or SKIP line.
    EXPECT_EQ(registry[i].title.find(": "), std::string::npos) << registry[i].id;
  }
}

TEST(ConformanceRegistry, GroupsInTheContractsOrderAndIdsNumberedFromOne) {
  const std::vector<std::string> order = {"VER", "HDL", "ERR", "CAL", "CFG", "BUF", "MAP",
                                          "CSR", "JOB", "PAR", "KV",  "RST", "THR", "NEV"};
  std::vector<std::string> groups;
  int expected_number = 0;
  for (const runner::Clause& clause : runner::conformance_clauses()) {
    if (groups.empty() || groups.back() != clause.group) {
      groups.push_back(clause.group);
      expected_number = 1;
    }
    EXPECT_EQ(clause.id, clause.group + "." + std::to_string(expected_number++));
  }
  EXPECT_EQ(groups, order);
}

TEST(ConformanceRegistry, PrefixesSelectWholeIds) {
  EXPECT_TRUE(runner::conformance_prefix_known("KV"));
  EXPECT_TRUE(runner::conformance_prefix_known("KV.1"));
  EXPECT_TRUE(runner::conformance_prefix_known("JOB."));
  EXPECT_FALSE(runner::conformance_prefix_known("K"));
  EXPECT_FALSE(runner::conformance_prefix_known("KV.99"));
  EXPECT_FALSE(runner::conformance_prefix_known("BOGUS"));
  EXPECT_FALSE(runner::conformance_prefix_known(""));
}

}  // namespace
