//===- Hostfile.cpp - DeepSpeed hostfiles and host selection --------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Hostfile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <set>

using namespace llvm;
using namespace zero::run;

static Error fail(const Twine &msg) {
  return createStringError(inconvertibleErrorCode(), msg.str());
}

const Host *Hostfile::find(StringRef name) const {
  for (const Host &h : hosts)
    if (h.name == name)
      return &h;
  return nullptr;
}

Expected<Hostfile> zero::run::parseHostfile(StringRef text, StringRef path) {
  Hostfile file;
  file.path = path.str();
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (auto [index, raw] : enumerate(lines)) {
    int64_t lineNo = index + 1;
    // A `#` starts a comment anywhere on the line (no host name has one).
    StringRef line = raw.split('#').first.trim();
    if (line.empty())
      continue;
    SmallVector<StringRef> fields;
    line.split(fields, ' ', -1, /*KeepEmpty=*/false);
    // Tabs separate fields too.
    SmallVector<StringRef> words;
    for (StringRef f : fields) {
      SmallVector<StringRef> parts;
      f.split(parts, '\t', -1, /*KeepEmpty=*/false);
      words.append(parts.begin(), parts.end());
    }
    uint64_t slots = 0;
    StringRef count;
    if (words.size() != 2 || !words[1].starts_with("slots=") ||
        (count = words[1].drop_front(6)).empty() || !all_of(count, isDigit) ||
        count.getAsInteger(10, slots))
      return fail(formatv("{0}:{1}: malformed line '{2}': expected "
                          "'hostname slots=N'",
                          path, lineNo, line));
    StringRef name = words[0];
    if (slots == 0)
      return fail(formatv("{0}:{1}: host '{2}' has zero slots; a host runs "
                          "at least one rank",
                          path, lineNo, name));
    if (const Host *first = file.find(name))
      return fail(formatv("{0}:{1}: host '{2}' is listed twice (first at "
                          "line {3})",
                          path, lineNo, name, first->line));
    Host host;
    host.name = name.str();
    host.line = lineNo;
    for (uint64_t s = 0; s < slots; ++s)
      host.slots.push_back(static_cast<int64_t>(s));
    file.hosts.push_back(std::move(host));
  }
  if (file.hosts.empty())
    return fail(path + ": no host in it (one 'hostname slots=N' a line)");
  return file;
}

Expected<Hostfile> zero::run::readHostfile(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return fail(path +
                ": cannot read the hostfile: " + buffer.getError().message());
  return parseHostfile((*buffer)->getBuffer(), path);
}

/// One NAME[:SLOT[,SLOT...]] of a filter; no slot means every slot.
struct NodeSpec {
  std::string name;
  std::set<int64_t> slots;
};

static Expected<std::vector<NodeSpec>> parseFilter(StringRef flag,
                                                   StringRef filter) {
  std::vector<NodeSpec> specs;
  SmallVector<StringRef> nodes;
  filter.split(nodes, '@');
  for (StringRef node : nodes) {
    auto [name, slotList] = node.split(':');
    if (name.empty())
      return fail(formatv("--{0} '{1}': an empty host name (the syntax is "
                          "host1@host2:0,2)",
                          flag, filter));
    NodeSpec spec;
    spec.name = name.str();
    if (node.contains(':')) {
      SmallVector<StringRef> slots;
      slotList.split(slots, ',');
      for (StringRef s : slots) {
        uint64_t slot;
        if (s.empty() || !all_of(s, isDigit) || s.getAsInteger(10, slot))
          return fail(formatv("--{0} '{1}': slot '{2}' of host '{3}' is not "
                              "a slot number",
                              flag, filter, s, name));
        spec.slots.insert(static_cast<int64_t>(slot));
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

Expected<std::vector<Host>> zero::run::selectHosts(const Hostfile &file,
                                                   StringRef include,
                                                   StringRef exclude) {
  if (!include.empty() && !exclude.empty())
    return fail("--include and --exclude are mutually exclusive (give one "
                "of them)");
  if (include.empty() && exclude.empty())
    return file.hosts;
  StringRef flag = include.empty() ? "exclude" : "include";
  StringRef filter = include.empty() ? exclude : include;
  auto specs = parseFilter(flag, filter);
  if (!specs)
    return specs.takeError();
  // The slots the filter names, by host (an empty set: every slot).
  std::map<std::string, std::set<int64_t>> named;
  std::set<std::string> whole;
  for (const NodeSpec &spec : *specs) {
    const Host *host = file.find(spec.name);
    if (!host) {
      std::string known;
      for (const Host &h : file.hosts)
        known += (known.empty() ? "" : ", ") + h.name;
      return fail(formatv("--{0}: host '{1}' is not in {2} (its hosts: {3})",
                          flag, spec.name, file.path, known));
    }
    for (int64_t slot : spec.slots)
      if (!is_contained(host->slots, slot))
        return fail(formatv("--{0}: host '{1}' has no slot {2} ({3}:{4} "
                            "gives it slots 0 to {5})",
                            flag, spec.name, slot, file.path, host->line,
                            host->slots.back()));
    if (spec.slots.empty())
      whole.insert(spec.name);
    named[spec.name].insert(spec.slots.begin(), spec.slots.end());
  }
  std::vector<Host> selected;
  for (const Host &host : file.hosts) {
    Host kept = host;
    bool listed = named.count(host.name);
    bool all = whole.count(host.name);
    kept.slots.clear();
    for (int64_t slot : host.slots) {
      bool inFilter = listed && (all || named[host.name].count(slot));
      if (inFilter == !include.empty())
        kept.slots.push_back(slot);
    }
    if (!kept.slots.empty())
      selected.push_back(std::move(kept));
  }
  if (selected.empty())
    return fail(formatv("--{0} '{1}' leaves no host of {2} to run on", flag,
                        filter, file.path));
  return selected;
}

Expected<int64_t> zero::run::ranksPerNode(const std::vector<Host> &hosts,
                                          StringRef path) {
  for (const Host &h : hosts)
    if (h.slots.size() != hosts.front().slots.size())
      return fail(formatv(
          "{0}: host '{1}' runs {2} rank(s) (line {3}) but host '{4}' runs "
          "{5} (line {6}); every host must run the same number of ranks, "
          "because the schedule places ranks in equal blocks by node",
          path, hosts.front().name, hosts.front().slots.size(),
          hosts.front().line, h.name, h.slots.size(), h.line));
  return static_cast<int64_t>(hosts.front().slots.size());
}
