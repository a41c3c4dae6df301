#!/usr/bin/env python3
"""Checks the runtime calls of lowered programs against the ABI table.

  check_abi.py abi.def program.ll [program.ll ...]

Reads every ZRT_KERNEL and ZRT_CTX entry of the runtime's ABI table
(runtime/include/zero_rt/abi.def: the functions generated code may call),
derives the LLVM declaration each C prototype implies, and checks that
 - every `declare ... @zrt_*` in the LLVM IR files is such an entry, with
   exactly that type, and
 - every such entry is declared by at least one of the files,
so that the table, the compiler's lowering and the inputs of this test cannot
drift apart. Prints one line per entry and a summary; exits 1 on a mismatch.
"""
import re
import sys

C_TO_LLVM = {"void": "void", "int32_t": "i32", "int64_t": "i64",
             "double": "double", "float": "float"}


def llvm_type(c_decl):
    """The LLVM type of a C parameter or return type (names dropped)."""
    c_decl = c_decl.strip()
    if "*" in c_decl:
        return "ptr"
    words = [w for w in c_decl.split() if w != "const"]
    if not words:
        raise ValueError("empty C type")
    return C_TO_LLVM[words[0]]


def split_params(text):
    text = text.strip()
    if text in ("", "void"):
        return []
    return [p for p in text.split(",")]


def table_entries(path):
    """name -> (return type, [parameter types]) of ZRT_KERNEL/ZRT_CTX/
    ZRT_COLLECTIVE."""
    src = open(path).read()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r"^\s*#.*$", "", src, flags=re.M)
    entries = {}
    for m in re.finditer(r"\bZRT_(KERNEL|CTX|COLLECTIVE)\s*\(", src):
        # The macro's arguments up to its matching parenthesis.
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        body = src[m.end():i - 1]
        args, depth, cur = [], 0, ""
        for ch in body:
            if ch == "," and depth == 0:
                args.append(cur)
                cur = ""
                continue
            depth += {"(": 1, ")": -1}.get(ch, 0)
            cur += ch
        args.append(cur)
        args = [a.strip() for a in args]
        if m.group(1) in ("KERNEL", "COLLECTIVE"):
            name, _impl, ret, params = args[0], args[1], args[2], args[3]
        else:
            name, ret, params = args[0], args[1], args[2]
        assert params.startswith("(") and params.endswith(")"), name
        entries[name] = (llvm_type(ret),
                         [llvm_type(p) for p in split_params(params[1:-1])])
    return entries


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    table = table_entries(argv[1])
    declared = {}
    errors = []
    decl = re.compile(r"^declare\s+(?:\w+\s+)*?(\S+)\s+@(zrt_\w+)\((.*)\)")
    for path in argv[2:]:
        for line in open(path):
            m = decl.match(line)
            if not m:
                continue
            ret, name, params = m.group(1), m.group(2), m.group(3)
            types = [p.strip().split()[0] for p in params.split(",")
                     if p.strip()]
            got = (ret, types)
            if name not in table:
                errors.append(f"{path}: declares @{name}, which the ABI "
                              "table does not list as callable")
                continue
            if got != table[name]:
                errors.append(f"{path}: declares @{name} as {got}, the ABI "
                              f"table's prototype is {table[name]}")
            declared[name] = got
    for name in sorted(table):
        ret, params = table[name]
        state = "called" if name in declared else "NOT CALLED"
        print(f"{name}: {ret} ({', '.join(params)}) {state}")
        if name not in declared:
            errors.append(f"{name}: no lowered program calls it (add an "
                          "input that uses it)")
    for e in errors:
        print("error:", e)
    print(f"{len(table)} entry points, {len(declared)} called, "
          f"{len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
