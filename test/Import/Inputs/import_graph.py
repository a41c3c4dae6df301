"""Checks how the modules of a Python package import each other.

usage: import_graph.py PACKAGE_DIR

Each module's imports of the package's own modules (`from . import x`,
`from .x import y`, `import pkg.x`) must be at its top level, never inside a
function or class, so that the graph below is the whole of it; only
__main__.py, which no module imports, may load modules inside main() (those
that need PyTorch, after checking that it is there). No module imports a
`_private` name of another, or reads one as `module._name`. The graph of
these imports has no cycle. Each violation is printed as
`file:line: error: ...`; the exit status is 1 if there is any.
"""

import ast
import os
import sys


def package_imports(tree, package, modules):
    """(import node, [module names], [imported names]) for each import of
    the package's own modules in `tree`."""
    for node in ast.walk(tree):
        targets, names = [], []
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                base = node.module
            elif node.level == 0 and node.module and \
                    node.module.split(".")[0] == package:
                base = node.module.partition(".")[2] or None
            else:
                continue
            if base is None:
                # from . import x, y: each a module of the package.
                targets = [a.name for a in node.names if a.name in modules]
            else:
                targets = [base.split(".")[0]]
                names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    targets.append(parts[1])
        if targets:
            yield node, targets, names


def top_level(tree):
    """The ids of the nodes outside any function or class."""
    seen = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        seen.add(id(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return seen


def find_cycle(graph):
    """A list of modules [a, b, ..., a] that import each other in a circle,
    or None."""
    state = {}  # module -> 1 while on the path, 2 when done
    path = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def main(argv):
    directory = os.path.normpath(argv[1])
    package = os.path.basename(directory)
    files = sorted(f for f in os.listdir(directory) if f.endswith(".py"))
    modules = {f[:-3] for f in files}
    graph = {m: set() for m in modules}
    errors = []
    edges = 0
    for f in files:
        module = f[:-3]
        path = os.path.join(directory, f)
        with open(path, encoding="utf-8") as src:
            tree = ast.parse(src.read(), path)
        top = top_level(tree)
        aliases = set()  # names bound to the package's modules here
        for node, targets, names in package_imports(tree, package, modules):
            line = node.lineno
            if id(node) not in top and module != "__main__":
                errors.append((path, line, "%s imports %s inside a function "
                               "or class: import at the top of the module" %
                               (module, ", ".join(targets))))
            for name in names:
                if name.startswith("_"):
                    errors.append((path, line, "%s imports %s's private name "
                                   "%s: make it public in %s, or move it" % (
                                       module, targets[0], name, targets[0])))
            if isinstance(node, ast.ImportFrom) and not names:
                aliases |= {a.asname or a.name for a in node.names}
            for t in targets:
                if t == "__main__":
                    errors.append((path, line, "%s imports __main__" %
                                   module))
                if t != module and t not in graph[module]:
                    graph[module].add(t)
                    edges += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and \
                    isinstance(node.value, ast.Name) and \
                    node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                errors.append((path, node.lineno, "%s reads %s's private "
                               "name %s: make it public in %s, or move it" % (
                                   module, node.value.id, node.attr,
                                   node.value.id)))
    cycle = find_cycle(graph)
    for path, line, message in sorted(errors):
        print("%s:%d: error: %s" % (path, line, message))
    if cycle:
        print("%s: error: import cycle: %s" % (directory, " -> ".join(cycle)))
    if errors or cycle:
        return 1
    print("%s: %d modules, %d imports between them, no cycle" % (
        package, len(modules), edges))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
