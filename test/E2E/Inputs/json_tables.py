"""Checks written JSON against the table it is generated from, so that a key
added on one side only fails a test:

  flight DEF RECORD... [--source FILE...]
      Each flight record (flight-rank<R>.json) has exactly the keys of
      zero_rt/flight.def, in its order, with values of its types.
  checkpoint DEF MANIFEST_DEF STEP_DIR... [--all-optional] [--source FILE...]
      Each step directory's manifest.json and rank files' headers have only
      keys of zero_rt/checkpoint.def (hf_model and peft: manifest.def's),
      every Required one and no ReadOnly one. --all-optional: every Optional
      key appears in some step directory.

--source: the C++ that writes or reads the JSON spells no key as a string
literal (it takes them from the table): neither one of the table's nor a
key-like literal where JSON is looked up, indexed or paired."""
import argparse
import json
import os
import re
import struct
import sys

errors = []


def error(msg):
    errors.append(msg)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def hyper_params(path):
    """The names of optimizers.def's ZRT_HYPER_PARAM rows, in order."""
    return [a[0] for m, a in macro_calls(path) if m == "ZRT_HYPER_PARAM"]


def macro_calls(path):
    """(macro, [argument text]) for each ZRT_* call of a .def, in order.
    A `#define ZRT_HYPER_PARAM` then `#include "zero_rt/optimizers.def"`
    is one call ZRT_HYPER_PARAM_ROWS of the rows' names and the presence
    the definition gives them (a field or a key per row, named as it)."""
    text = strip_comments(open(path).read()).replace("\\\n", " ")
    # The #define lines of the table's defaults are not entries.
    lines, rows_define = [], None
    for l in text.splitlines():
        line = l.strip()
        if line.startswith("#define ZRT_HYPER_PARAM("):
            rows_define = line
        elif line == '#include "zero_rt/optimizers.def"' and rows_define:
            table = os.path.join(os.path.dirname(path), "optimizers.def")
            presence = re.search(r"\b(Required|Optional|ReadOnly)\b",
                                 rows_define).group(1)
            lines.append("ZRT_HYPER_PARAM_ROWS(%s)" % ", ".join(
                [presence] + hyper_params(table)))
            rows_define = None
        elif not line.startswith("#"):
            lines.append(l)
    text = "\n".join(lines)
    calls = []
    for m in re.finditer(r"\b(ZRT_[A-Z_]+)\(", text):
        depth, i, args, cur = 1, m.end(), [], ""
        while depth:
            c = text[i]
            if c == '"':
                j = i + 1
                while text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                cur += text[i:j + 1]
                i = j + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if not depth:
                    break
            elif c == "," and depth == 1:
                args.append(cur.strip())
                cur = ""
                i += 1
                continue
            cur += c
            i += 1
        args.append(cur.strip())
        calls.append((m.group(1), args))
    return calls


def literal(arg):
    """The value of a C string literal argument ("a" "b" concatenated)."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', arg)
    return "".join(parts) if parts else None


def source_literals(path):
    """(line number, line, value, text before, text after) of each string
    literal of a C++ file."""
    out = []
    for n, line in enumerate(open(path).read().splitlines(), 1):
        code = re.sub(r"^\s*//.*", "", line)
        for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', code):
            out.append((n, line, m.group(1), code[:m.start()],
                        code[m.end():]))
    return out


# Where a literal is a JSON key: looked up, indexed, passed on, paired in
# an initializer list or named as a constant.
KEY_BEFORE = re.compile(r"((\.|->)(at|value|contains|find|erase|count|get\w*)"
                        r"\(\s*|\[\s*|=\s*|,\s*)$")
PAIR = (re.compile(r"\{\s*$"), re.compile(r"^\s*,"))
ACCESS = re.compile(r"((\.|->)(at|value|contains|find|erase|count|get\w*)"
                    r"\(\s*|\[\s*)$")


def check_sources(sources, keys, exempt=None):
    for path in sources:
        for n, line, value, before, after in source_literals(path):
            if exempt and exempt.search(line):
                continue
            spelled = None
            pair = PAIR[0].search(before) and PAIR[1].search(after)
            if value in keys and (KEY_BEFORE.search(before) or pair):
                spelled = value
            # A key the table lacks, read or written.
            if re.fullmatch(r"[a-z][a-z0-9_]*", value) and (
                    ACCESS.search(before) or pair):
                spelled = value
            # A key spelled inside a literal ("\"key\": ").
            m = re.search(r'\\"([a-z_0-9]+)\\":', value)
            if m and m.group(1) in keys:
                spelled = m.group(1)
            if spelled:
                error('%s:%d: spells the key "%s" by hand; take it from the '
                      "table: %s" % (path, n, spelled, line.strip()))


# --- flight records ---------------------------------------------------------

def flight(args):
    objects, enums, version, checksum = {}, {}, None, None
    current = None
    for macro, a in macro_calls(args.table):
        if macro == "ZRT_FLIGHT_VERSION":
            version = int(a[0])
        elif macro == "ZRT_FLIGHT_CHECKSUM":
            checksum = literal(a[0])
        elif macro == "ZRT_FLIGHT_ENUM":
            current = enums.setdefault(a[0], [])
        elif macro == "ZRT_FLIGHT_CASE":
            current.append(literal(a[1]))
        elif macro == "ZRT_FLIGHT_OBJECT":
            current = objects.setdefault(a[0], [])
        elif macro == "ZRT_FLIGHT_FIELD":
            current.append((a[0], a[1], literal(a[2])))
    keys = {f[2] for fields in objects.values() for f in fields}
    keys.add(checksum)
    check_sources(args.source, keys)

    def value(where, type_, v):
        vector = re.fullmatch(r"std::vector<(\w+)>", type_)
        if type_ == "int64_t":
            ok = isinstance(v, int)
        elif type_ == "std::string":
            ok = isinstance(v, str)
        elif type_ in enums:
            ok = v in enums[type_]
        elif type_ == "zrt_rank_set":
            ok = (isinstance(v, list) and len(v) == 3 and
                  all(isinstance(x, int) for x in v))
        elif vector:
            ok = isinstance(v, list)
            for i, x in enumerate(v if ok else []):
                obj("%s[%d]" % (where, i), vector.group(1), x)
        elif type_ in objects:
            obj(where, type_, v)
            ok = True
        else:
            sys.exit("flight.def: unknown type %s" % type_)
        if not ok:
            error("%s: %r is not a %s" % (where, v, type_))

    def obj(where, name, pairs, extra=()):
        if not isinstance(pairs, list):
            error("%s: not an object" % where)
            return
        want = [f[2] for f in objects[name]] + list(extra)
        got = [k for k, _ in pairs]
        if got != want:
            error("%s: keys %s, flight.def's %s %s" %
                  (where, got, name, want))
            return
        for (type_, _, key), (_, v) in zip(objects[name], pairs):
            value("%s.%s" % (where, key), type_, v)

    for path in args.files:
        pairs = json.loads(open(path).read(), object_pairs_hook=list)
        obj(path, "Record", pairs, [checksum])
        if dict(pairs).get("version") != version:
            error("%s: version %r, flight.def's %d" %
                  (path, dict(pairs).get("version"), version))
    return len(args.files)


# --- checkpoints -------------------------------------------------------------

def manifest_objects(path):
    """manifest.def's objects: name -> [(field name, key, presence)]."""
    objects, current = {}, None
    for macro, a in macro_calls(path):
        if macro == "ZRT_MANIFEST_OBJECT":
            current = objects.setdefault(a[0], [])
        elif macro == "ZRT_MANIFEST_FIELD":
            current.append((a[1], literal(a[2]), a[3]))
        elif macro == "ZRT_HYPER_PARAM_ROWS":
            current.extend((name, name, a[0]) for name in a[1:])
    return objects


def checkpoint_objects(path, manifest):
    """checkpoint.def's objects: name -> {key: presence}."""
    objects, ids, current = {}, {}, None
    for macro, a in macro_calls(path):
        if macro == "ZRT_CHECKPOINT_OBJECT":
            current = objects.setdefault(a[0], {})
            name = a[0]
        elif macro in ("ZRT_CHECKPOINT_KEY", "ZRT_CHECKPOINT_SCALER"):
            ident, expr, presence = a[0], a[1], a[2]
            key = literal(expr)
            m = re.fullmatch(r"manifest::(\w+)::(\w+)Key", expr)
            n = re.fullmatch(r"(\w+)::(\w+)", expr)
            if key is None and m:
                key = {f: k for f, k, _ in manifest[m.group(1)]}[m.group(2)]
            elif key is None and n:
                key = ids[(n.group(1), n.group(2))]
            if key is None:
                sys.exit("checkpoint.def: cannot resolve key %s" % expr)
            ids[(name, ident)] = key
            current[key] = presence
        elif macro == "ZRT_HYPER_PARAM_ROWS":
            for key in a[1:]:
                ids[(name, key)] = key
                current[key] = a[0]
    return objects


def checkpoint(args):
    manifest = manifest_objects(args.manifest_table)
    table = checkpoint_objects(args.table, manifest)
    # manifest.def's objects that a checkpoint keeps, as checkpoint objects.
    for name in ("HfModel", "TiedName", "HfBuffer", "Peft", "Lora"):
        table["manifest::" + name] = {k: p for _, k, p in manifest[name]}
    keys = {k for o in table.values() for k in o}
    # safetensors' own metadata ("format": "pt") is not a checkpoint's.
    check_sources(args.source, keys, re.compile(r'"pt"'))
    seen = set()
    # What each object's members hold (arrays: of that object).
    members = {
        "ManifestFile": {"optimizer": "Optimizer",
                         "partitions": "Partition", "params": "Param",
                         "files": "RankFile", "hf_model": "manifest::HfModel",
                         "peft": "manifest::Peft"},
        "manifest::HfModel": {"tied": "manifest::TiedName",
                              "buffers": "manifest::HfBuffer"},
        "manifest::Peft": {"layers": "manifest::Lora"},
        "Header": {"sections": "Section", "loss_scaler": "LossScaler"},
    }

    def obj(where, name, v):
        if not isinstance(v, dict):
            error("%s: not an object" % where)
            return
        for key, presence in table[name].items():
            if presence == "Required" and key not in v:
                error("%s: lacks %s's required key %s" % (where, name, key))
            if presence == "ReadOnly" and key in v:
                error("%s: has %s's read-only key %s" % (where, name, key))
        for key, x in v.items():
            if key not in table[name]:
                error("%s: key %s is not in the table's %s" %
                      (where, key, name))
                continue
            seen.add((name, key))
            inner = members.get(name, {}).get(key)
            if inner and isinstance(x, list):
                for i, y in enumerate(x):
                    obj("%s.%s[%d]" % (where, key, i), inner, y)
            elif inner:
                obj("%s.%s" % (where, key), inner, x)

    for step in args.dirs:
        path = os.path.join(step, "manifest.json")
        m = json.load(open(path))
        obj(path, "ManifestFile", m)
        for f in m.get("files", []):
            rank = os.path.join(step, f["file"])
            data = open(rank, "rb").read()
            (length,) = struct.unpack_from("<Q", data, 8)
            obj(rank, "Header", json.loads(data[16:16 + length]))
    if args.all_optional:
        for name, o in table.items():
            for key, presence in o.items():
                if presence == "Optional" and (name, key) not in seen:
                    error("%s's optional key %s is in none of %s" %
                          (name, key, " ".join(args.dirs)))
    return len(args.dirs)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("flight")
    f.add_argument("table")
    f.add_argument("files", nargs="+")
    f.add_argument("--source", nargs="+", default=[])
    c = sub.add_parser("checkpoint")
    c.add_argument("table")
    c.add_argument("manifest_table")
    c.add_argument("dirs", nargs="+")
    c.add_argument("--all-optional", action="store_true")
    c.add_argument("--source", nargs="+", default=[])
    args = p.parse_args()
    n = flight(args) if args.cmd == "flight" else checkpoint(args)
    for e in errors:
        print("error: " + e)
    if errors:
        sys.exit(1)
    print("%s: %d file(s) match the table" % (args.cmd, n))


if __name__ == "__main__":
    main()
