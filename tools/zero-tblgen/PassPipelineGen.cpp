//===- PassPipelineGen.cpp - Pass pipelines from their passes' options ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// A PassPipeline record (zero/Pipelines/PassPipelineBase.td) names the
// passes whose options a pipeline takes, and its own options. Its options
// struct is generated from the passes' Option records, under their names,
// types, descriptions and defaults, as mlir-tblgen generates each pass's
// options, so that an option is declared once: in the pass's `options`.
//
//===----------------------------------------------------------------------===//

#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Pass.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"

#include <vector>

using namespace mlir;
using namespace mlir::tblgen;
using llvm::Record;
using llvm::RecordKeeper;

namespace {

/// One option of a pipeline: an Option record, and the passes whose
/// `options` list it (none: the pipeline's own).
struct PipelineOption {
  const Record *def;
  std::vector<const Record *> passes;

  PassOption get() const { return PassOption(def); }
};

/// A PassPipeline record: its passes and its options, each option once.
class PassPipeline {
public:
  explicit PassPipeline(const Record *def);

  StringRef getName() const { return def->getName(); }
  StringRef getArgument() const { return def->getValueAsString("argument"); }
  StringRef getSummary() const { return def->getValueAsString("summary"); }
  StringRef getDescription() const {
    return def->getValueAsString("description");
  }
  ArrayRef<Pass> getPasses() const { return passes; }
  /// Its own options first, then those of its passes, in their order.
  ArrayRef<PipelineOption> getOptions() const { return options; }

private:
  void addOption(const Record *option, const Record *pass);

  const Record *def;
  std::vector<Pass> passes;
  std::vector<PipelineOption> options;
};

} // namespace

PassPipeline::PassPipeline(const Record *def) : def(def) {
  for (const Record *option : def->getValueAsListOfDefs("options"))
    addOption(option, nullptr);
  for (const Record *pass : def->getValueAsListOfDefs("passes")) {
    passes.emplace_back(pass);
    for (const Record *option : pass->getValueAsListOfDefs("options"))
      addOption(option, pass);
  }
}

void PassPipeline::addOption(const Record *option, const Record *pass) {
  PassOption opt(option);
  auto owner = [&](const Record *p) {
    return p ? ("pass " + p->getName()).str()
             : ("pipeline " + def->getName()).str();
  };
  // An option spelled twice is two declarations, free to drift apart (or,
  // spelled alike, one anonymous record TableGen made of both): the passes
  // must list one named Option def.
  auto twice = [&](const PipelineOption &known) {
    llvm::PrintFatalError(
        def,
        llvm::formatv("option '{0}' ({1}) of {2} is declared again by "
                      "{3}; declare it once, as an Option def that both "
                      "list",
                      opt.getArgument(), opt.getCppVariableName(),
                      owner(known.passes.empty() ? nullptr : known.passes[0]),
                      owner(pass)));
  };
  for (PipelineOption &known : options) {
    if (known.def == option) {
      if (option->isAnonymous())
        twice(known);
      known.passes.push_back(pass);
      return;
    }
    PassOption other = known.get();
    if (other.getArgument() == opt.getArgument() ||
        other.getCppVariableName() == opt.getCppVariableName())
      twice(known);
  }
  PipelineOption entry{option, {}};
  if (pass)
    entry.passes.push_back(pass);
  options.push_back(std::move(entry));
}

static std::vector<PassPipeline> getPipelines(const RecordKeeper &records) {
  std::vector<PassPipeline> pipelines;
  for (const Record *def : records.getAllDerivedDefinitions("PassPipeline"))
    pipelines.emplace_back(def);
  return pipelines;
}

//===----------------------------------------------------------------------===//
// -gen-pass-pipeline-decls
//===----------------------------------------------------------------------===//

/// An option member, written as mlir-tblgen writes a pass's.
static void emitOptionDecl(const PassOption &opt, raw_ostream &os) {
  os << llvm::formatv("  {0}<{1}> {2}{{*this, \"{3}\", "
                      "::llvm::cl::desc(R\"PO({4})PO\")",
                      opt.isListOption() ? "ListOption" : "Option",
                      opt.getType(), opt.getCppVariableName(),
                      opt.getArgument(), opt.getDescription());
  if (std::optional<StringRef> value = opt.getDefaultValue())
    os << ", ::llvm::cl::init(" << *value << ")";
  if (std::optional<StringRef> flags = opt.getAdditionalFlags())
    os << ", " << *flags;
  os << "};\n";
}

/// `get<Pass>Options()`: the pass's generated options struct, filled with
/// the pipeline's values.
static void emitPassOptionsGetter(const Pass &pass, raw_ostream &os) {
  if (pass.getOptions().empty())
    return;
  StringRef name = pass.getDef()->getName();
  os << llvm::formatv("\n  /// The options of {0}.\n"
                      "  {1}Options get{1}Options() const {{\n"
                      "    {1}Options options;\n",
                      pass.getArgument(), name);
  for (const Record *def : pass.getDef()->getValueAsListOfDefs("options")) {
    PassOption opt(def);
    StringRef var = opt.getCppVariableName();
    if (opt.isListOption())
      os << llvm::formatv("    options.{0}.assign({0}.begin(), {0}.end());\n",
                          var);
    else
      os << llvm::formatv("    options.{0} = {0}.getValue();\n", var);
  }
  os << "    return options;\n  }\n";
}

static void emitPipelineDecl(const PassPipeline &pipeline, raw_ostream &os) {
  StringRef name = pipeline.getName();
  os << llvm::formatv("\n/// Options of `{0}`: its own, then those of the "
                      "passes it runs.\n"
                      "struct {1}Options\n"
                      "    : public ::mlir::PassPipelineOptions<{1}Options> "
                      "{{\n",
                      pipeline.getArgument(), name);
  StringRef group;
  for (const PipelineOption &entry : pipeline.getOptions()) {
    StringRef from = entry.passes.empty()
                         ? pipeline.getArgument()
                         : Pass(entry.passes.front()).getArgument();
    if (from != group)
      os << "  // " << from << "\n";
    group = from;
    emitOptionDecl(entry.get(), os);
  }
  for (const Pass &pass : pipeline.getPasses())
    emitPassOptionsGetter(pass, os);
  os << "};\n";
}

static void emitPipelineRegistration(const PassPipeline &pipeline,
                                     raw_ostream &os) {
  os << llvm::formatv("\n/// Registers `{0}`, built by build{1}, which the "
                      "includer declares.\n"
                      "inline void register{1}() {{\n"
                      "  ::mlir::PassPipelineRegistration<{1}Options>(\n"
                      "      \"{0}\", R\"PD({2})PD\", build{1});\n"
                      "}\n",
                      pipeline.getArgument(), pipeline.getName(),
                      pipeline.getSummary());
}

static bool emitPipelineDecls(const RecordKeeper &records, raw_ostream &os) {
  std::vector<PassPipeline> pipelines = getPipelines(records);
  os << "/* Autogenerated by zero-tblgen; don't manually edit */\n\n";
  os << "#ifdef GEN_PASS_PIPELINE_DECL\n";
  for (const PassPipeline &pipeline : pipelines)
    emitPipelineDecl(pipeline, os);
  os << "#undef GEN_PASS_PIPELINE_DECL\n";
  os << "#endif // GEN_PASS_PIPELINE_DECL\n\n";
  os << "#ifdef GEN_PASS_PIPELINE_REGISTRATION\n";
  for (const PassPipeline &pipeline : pipelines)
    emitPipelineRegistration(pipeline, os);
  os << "#undef GEN_PASS_PIPELINE_REGISTRATION\n";
  os << "#endif // GEN_PASS_PIPELINE_REGISTRATION\n";
  return false;
}

static mlir::GenRegistration
    genPipelineDecls("gen-pass-pipeline-decls",
                     "Generate pass pipeline options and registration",
                     emitPipelineDecls);

//===----------------------------------------------------------------------===//
// -gen-pass-pipeline-flags
//===----------------------------------------------------------------------===//

/// `is<Name>Option(name)` and `is<Name>Flag(name)`: the pipeline's options
/// as a command line spells them (zero-compile's `--name value`), which of
/// them are flags (a bool: `--name` alone sets it), without the options
/// struct, so that a tool that only forwards them needs no MLIR.
static void emitPipelineFlags(const PassPipeline &pipeline, raw_ostream &os) {
  auto emitSet = [&](StringRef what, StringRef doc, auto keep) {
    os << llvm::formatv("\n/// Whether `name` is {0} of `{1}`.\n"
                        "inline bool is{2}{3}(::llvm::StringRef name) {{\n"
                        "  return ::llvm::StringSwitch<bool>(name)\n",
                        doc, pipeline.getArgument(), pipeline.getName(), what);
    for (const PipelineOption &entry : pipeline.getOptions())
      if (keep(entry.get()))
        os << "      .Case(\"" << entry.get().getArgument() << "\", true)\n";
    os << "      .Default(false);\n}\n";
  };
  emitSet("Option", "an option", [](const PassOption &) { return true; });
  emitSet("Flag",
          "a boolean option, a flag on a command line (`--name` sets it, "
          "`--name=false` clears it)",
          [](const PassOption &opt) {
            return !opt.isListOption() && opt.getType() == "bool";
          });
}

static bool emitPipelineFlagDecls(const RecordKeeper &records,
                                  raw_ostream &os) {
  os << "/* Autogenerated by zero-tblgen; don't manually edit */\n";
  for (const PassPipeline &pipeline : getPipelines(records))
    emitPipelineFlags(pipeline, os);
  return false;
}

static mlir::GenRegistration
    genPipelineFlags("gen-pass-pipeline-flags",
                     "Generate a pass pipeline's option names and flags",
                     emitPipelineFlagDecls);

//===----------------------------------------------------------------------===//
// -gen-pass-pipeline-doc
//===----------------------------------------------------------------------===//

/// An options block in the layout of mlir-tblgen's pass documentation.
static void emitOptionsDoc(ArrayRef<PassOption> opts, raw_ostream &os) {
  size_t width = 0;
  for (const PassOption &opt : opts)
    width = std::max(width, opt.getArgument().size());
  os << "```\n";
  for (const PassOption &opt : opts)
    os << "-" << llvm::left_justify(opt.getArgument(), width) << " : "
       << opt.getDescription() << "\n";
  os << "```\n";
}

static bool emitPipelineDocs(const RecordKeeper &records, raw_ostream &os) {
  os << "<!-- Autogenerated by zero-tblgen; don't manually edit -->\n";
  for (const PassPipeline &pipeline : getPipelines(records)) {
    os << llvm::formatv("\n### `-{0}`\n\n_{1}_\n", pipeline.getArgument(),
                        pipeline.getSummary());
    // Trimmed of blank lines only: the first line's indent is the block's.
    if (StringRef description = pipeline.getDescription().ltrim("\r\n").rtrim();
        !description.empty()) {
      // Unindented, as mlir-tblgen writes a pass's description.
      SmallVector<StringRef> lines;
      description.split(lines, '\n');
      size_t indent = StringRef::npos;
      for (StringRef line : lines)
        if (!line.trim().empty())
          indent = std::min(indent, line.find_first_not_of(' '));
      os << "\n";
      for (StringRef line : lines)
        os << line.drop_front(std::min(indent, line.size())).rtrim() << "\n";
    }
    std::vector<PassOption> own;
    for (const PipelineOption &entry : pipeline.getOptions())
      if (entry.passes.empty())
        own.push_back(entry.get());
    if (!own.empty()) {
      os << "\n#### Options\n\n";
      emitOptionsDoc(own, os);
    }
    for (const Pass &pass : pipeline.getPasses()) {
      if (pass.getOptions().empty())
        continue;
      os << llvm::formatv("\n#### Options of `-{0}`\n\n", pass.getArgument());
      emitOptionsDoc(pass.getOptions(), os);
    }
  }
  return false;
}

static mlir::GenRegistration
    genPipelineDocs("gen-pass-pipeline-doc",
                    "Generate pass pipeline documentation", emitPipelineDocs);
