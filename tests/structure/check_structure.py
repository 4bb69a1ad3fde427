#!/usr/bin/python3
"""Structural rules of the tree, checked on every run (ctest Structure.*).

What it checks
    decisions   No client, daemon or binding code decides anything by an
                error's message text: no .find/.rfind/.starts_with/.compare/
                == / != on message() or error_message() in C++, no
                .find/.startswith/== / in on an error's .message or str(err)
                in Python. Decisions read Status::code() and
                Status::reason() (include/mcdma/codes.h); the text is
                for people. Test files are not scanned (a test may check the
                text a person reads).
    engine      No engine header (daemon/src/engine/engine*.hpp and everything
                under daemon/src/engine/) includes protobuf or gRPC: the
                engine's snapshots are plain structs and the gRPC services
                convert them.
    main        daemon/src/main.cpp has at most MAIN_MAX_LINES lines: start-up
                lives in the Daemon object and the options table.
    layering    Nothing under common/ reaches into client/: no #include of a
                header that lives under client/ (the public headers are in
                include/mcdma/, the one public include root), and no
                common/ CMake file names client/.
    rooms       The engine lives in one room: no file named engine*.hpp or
                engine*.cpp outside daemon/src/engine/.
    map         docs/architecture.md section 1 is the one map of the tree:
                every folder it names exists, and every folder that holds
                source (C, C++, CUDA, Python, protobuf, shell or CMake
                files) is named there.
    paths       No tracked text file names a place outside the repository
                (a sibling checkout, a machine's home or work directory).

The map's format (architecture.md section 1, its first ``` block): a line
whose first word ends in "/" names a folder; a deeper-indented folder line
is inside the nearest shallower one above it ("  engine/" under
"daemon/src/" is daemon/src/engine/). Other lines (files, targets,
explanations) are prose to this check.

How
    Comments and string literals of C and C++ files are blanked first
    (line numbers kept), so prose may mention what code may not do. Each
    hit is printed as file:line: rule: text; exit 1 on any hit.
    --self-test runs the checks on a small temporary tree with known
    violations and fails unless exactly those are reported.

Run with Debian's /usr/bin/python3; standard library only.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]
# One reader of C and C++ text for the tree's checks: the portability check's.
sys.path.insert(0, str(SOURCE_ROOT / "tests" / "portability"))
from check_linux_only import strip_comments_and_strings  # noqa: E402
CPP_EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".c")
DECISION_FOLDERS = ("client", "daemon", "bindings")
MAIN_MAX_LINES = 60
MAP_DOC = Path("docs/architecture.md")
MAP_HEADING = "## 1."
# What makes a folder a source folder for the map rule.
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".cc", ".cu", ".py", ".pyi", ".proto", ".sh",
                   ".cmake", ".in")
SOURCE_NAMES = ("CMakeLists.txt",)

CPP_MESSAGE_DECISION = re.compile(
    r"\b(?:error_message|message|msg|what)(?:\(\))?\s*\.\s*(?:find|rfind|starts_with|"
    r"ends_with|compare|find_first_of)\s*\("
    r"|\b(?:error_)?message\(\)\s*[=!]="
    r"|\b(?:error_)?message\s*[=!]=(?!\s*(?:nullptr|NULL)\b)"
    r"|(?:==|!=)\s*\w+(?:\.|->)(?:error_)?message\(\)"
    r"|\b(?:Contains|StartsWith|Has)\(\s*(?:\w+(?:\.|->))?(?:e|err|error|msg|message|"
    r"last_error|error_message)(?:\(\))?\s*,"
    r"|\bStatusFromCodedMessage\b")
PY_MESSAGE_DECISION = re.compile(
    r"\.message\s*(?:\.\s*(?:find|startswith|endswith)\s*\(|[=!]=)"
    r"|\bin\s+(?:\w+\.message|str\(\s*\w+\s*\))"
    r"|\bstr\(\s*(?:e|err|exc|error)\s*\)\s*(?:\.\s*(?:find|startswith)\s*\(|[=!]=)")
PROTOBUF_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](?:[^">]*\.pb\.h|google/protobuf/|grpcpp/)')
OUTSIDE_PATH = re.compile(r"\.\./share[d]\b|(?<![\w.])/wor[k]/|(?<![\w.])/home/\w|(?<![\w.])/root/\w")


def strip_cpp(text):
    """Comments and string/char literals blanked, newlines and #include names kept."""
    return strip_comments_and_strings(text)


def strip_python(text):
    """Comments and docstring lines blanked (line numbers kept); strings stay."""
    lines, in_doc = [], False
    for line in text.split("\n"):
        stripped = line.strip()
        if in_doc:
            in_doc = not (stripped.endswith('"""') or stripped.endswith("'''"))
            lines.append("")
        elif stripped.startswith(('"""', "'''")):
            quote = stripped[:3]
            in_doc = not (len(stripped) > 3 and stripped.endswith(quote))
            lines.append("")
        else:
            lines.append(re.sub(r"#.*$", "", line))
    return "\n".join(lines)


def is_test_file(rel):
    name = rel.name
    return (name.startswith("test_") or "_test." in name or name.endswith("_test_support.hpp")
            or name == "conftest.py")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout
        return [Path(p) for p in out.splitlines() if (root / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p.relative_to(root) for p in root.rglob("*")
                if p.is_file() and ".git" not in p.parts and not p.parts[len(root.parts)].startswith("build")]


INCLUDE_LINE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ENGINE_FILE = re.compile(r"^engine.*\.(?:hpp|cpp)$")


def client_headers(files):
    """Include names that resolve into client/: each header under client/
    by its path below client/, client/src/ and its own folder."""
    names = set()
    for rel in files:
        if rel.parts[:1] != ("client",) or rel.suffix not in (".hpp", ".h"):
            continue
        parts = rel.parts
        for start in range(1, len(parts)):
            names.add("/".join(parts[start:]))
    return names


def map_folders(text):
    """The folders the map names: (line number, folder) in order, or None
    when there is no section 1 with a ``` block."""
    lines = text.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(MAP_HEADING))
        fence = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    except StopIteration:
        return None
    folders, stack = [], []  # stack: (indent, folder)
    for number in range(fence + 1, end):
        line = lines[number]
        words = line.split()
        if not words or not words[0].endswith("/"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        name = words[0].strip("/")
        folder = f"{stack[-1][1]}/{name}" if stack else name
        stack.append((indent, folder))
        folders.append((number + 1, folder))
    return folders


def source_folders(files):
    folders = set()
    for rel in files:
        if rel.suffix in SOURCE_SUFFIXES or rel.name in SOURCE_NAMES:
            if len(rel.parts) > 1:
                folders.add(str(rel.parent))
    return folders


def check_map(root, files):
    hits = []
    doc = root / MAP_DOC
    try:
        named = map_folders(doc.read_text())
    except OSError:
        named = None
    if named is None:
        return [(MAP_DOC, 1, "map", f"no ``` block under a '{MAP_HEADING}' heading")]
    for number, folder in named:
        if not (root / folder).is_dir():
            hits.append((MAP_DOC, number, "map", f"{folder}/ is named but does not exist"))
    named_set = {folder for _, folder in named}
    for folder in sorted(source_folders(files) - named_set):
        hits.append((Path(folder), 0, "map", f"{folder}/ holds source but {MAP_DOC} section 1 "
                     "does not name it"))
    return hits


def check(root):
    hits = []
    files = tracked_files(root)
    into_client = client_headers(files)
    for rel in files:
        path = root / rel
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        top = rel.parts[0] if rel.parts else ""
        # decisions
        if top in DECISION_FOLDERS and not is_test_file(rel):
            if rel.suffix in CPP_EXTENSIONS:
                for number, line in enumerate(strip_cpp(text).split("\n"), 1):
                    if CPP_MESSAGE_DECISION.search(line):
                        hits.append((rel, number, "decisions", line.strip()))
            elif rel.suffix == ".py":
                for number, line in enumerate(strip_python(text).split("\n"), 1):
                    if PY_MESSAGE_DECISION.search(line):
                        hits.append((rel, number, "decisions", line.strip()))
        # engine
        parts = rel.parts
        is_engine_header = (rel.suffix == ".hpp" and parts[:2] == ("daemon", "src") and
                            (rel.name.startswith("engine") or "engine" in parts[2:-1]))
        if is_engine_header:
            for number, line in enumerate(text.split("\n"), 1):
                if PROTOBUF_INCLUDE.search(line):
                    hits.append((rel, number, "engine", line.strip()))
        # layering
        if parts[:1] == ("common",):
            if rel.suffix in CPP_EXTENSIONS:
                for number, line in enumerate(text.split("\n"), 1):
                    match = INCLUDE_LINE.search(line)
                    if match and (match.group(1) in into_client or
                                  match.group(1).startswith("client/")):
                        hits.append((rel, number, "layering", line.strip()))
            elif rel.name in SOURCE_NAMES or rel.suffix == ".cmake":
                for number, line in enumerate(text.split("\n"), 1):
                    code = re.sub(r"#.*$", "", line)
                    if re.search(r"(?<![\w.])client/", code):
                        hits.append((rel, number, "layering", line.strip()))
        # rooms
        if ENGINE_FILE.match(rel.name) and parts[:3] != ("daemon", "src", "engine"):
            hits.append((rel, 1, "rooms", f"{rel.name} outside daemon/src/engine/"))
        # main
        if rel == Path("daemon/src/main.cpp"):
            count = text.count("\n")
            if count > MAIN_MAX_LINES:
                hits.append((rel, count, "main", f"{count} lines, at most {MAIN_MAX_LINES}"))
        # paths
        if rel.name != Path(__file__).name:
            for number, line in enumerate(text.split("\n"), 1):
                if OUTSIDE_PATH.search(line):
                    hits.append((rel, number, "paths", line.strip()))
    hits.extend(check_map(root, files))
    return hits, len(files)


RULES = ("decisions", "engine", "main", "layering", "rooms", "map", "paths")


def report(root, rule=None):
    hits, scanned = check(root)
    if rule:
        hits = [h for h in hits if h[2] == rule]
    for rel, number, rule_name, line in hits:
        print(f"{rel}:{number}: {rule_name}: {line}")
    print(f"{len(hits)} violations of {rule or ', '.join(RULES)}, {scanned} files checked")
    return 1 if hits else 0


SELF_TEST_TREE = {
    "client/src/a.cpp": (
        "// message().find(\"x\") in a comment is fine\n"
        "bool A(const Status& s) { return s.message().rfind(\"no service\", 0) == 0; }\n"
        "bool B(const Status& s) { return s.reason() == Reason::kNotLinked; }\n"
        "auto t = \"message().find(\";\n"
        "bool C(const grpc::Status& g) { return g.error_message() == \"x\"; }\n"
        "void D(std::string message) { if (message.rfind(\"no service\", 0) == 0) F(); }\n"
        "bool N(const char* message) { return message == nullptr || message != NULL; }\n"
        "bool E(const Link& l) { return Contains(l.last_error(), \"says it is\"); }\n"),
    "client/src/a_test.cpp": "bool T(const Status& s) { return s.message().find(\"x\") == 0; }\n",
    "daemon/src/engine_x.hpp": "#include <string>\n#include \"mcdma/v1/admin.pb.h\"\n",
    "daemon/src/engine/call_table.hpp": "#include <grpcpp/grpcpp.h>\n",
    "daemon/src/control.hpp": "#include \"mcdma/v1/admin.pb.h\"\n",
    "daemon/src/main.cpp": "int x;\n" * (MAIN_MAX_LINES + 1),
    "bindings/python/m.py": (
        "# if 'gone' in err.message: a comment\n"
        "def f(err):\n"
        "    if \"is not linked\" in err.message:\n"
        "        return 1\n"
        "    return err.reason\n"),
    "docs/a.md": "see ../" "shared/notes for more\nthe socket is /run/mcdma/rpcd.sock\n",
    "client/src/client_core.hpp": "#pragma once\n",
    "common/src/x.cpp": "#include \"client_core.hpp\"\n#include \"mcdma/status.hpp\"\n",
    "common/CMakeLists.txt": "target_include_directories(x PUBLIC ../client/include)\n# client/\n",
    "tests/engine/call_table_test.cpp": "int t;\n",
    "docs/architecture.md": (
        "# A\n## 1. Folders\n\n```\nclient/   the client\n  src/\ncommon/\n  src/\n"
        "daemon/src/   the daemon\n  engine/   its engine\nbindings/python/\ngone/\n"
        "```\n## 2. Next\n```\ntests/engine/\n```\n"),
}
SELF_TEST_EXPECTED = [
    ("bindings/python/m.py", 3, "decisions"),
    ("client/src/a.cpp", 2, "decisions"),
    ("client/src/a.cpp", 5, "decisions"),
    ("client/src/a.cpp", 6, "decisions"),
    ("client/src/a.cpp", 8, "decisions"),
    ("daemon/src/engine/call_table.hpp", 1, "engine"),
    ("daemon/src/engine_x.hpp", 2, "engine"),
    ("daemon/src/main.cpp", MAIN_MAX_LINES + 1, "main"),
    ("docs/a.md", 1, "paths"),
    ("common/src/x.cpp", 1, "layering"),
    ("common/CMakeLists.txt", 1, "layering"),
    ("daemon/src/engine_x.hpp", 1, "rooms"),
    ("docs/architecture.md", 12, "map"),
    ("tests/engine", 0, "map"),
]


def self_test():
    with tempfile.TemporaryDirectory(prefix="check_structure.") as tmp:
        root = Path(tmp)
        for rel, text in SELF_TEST_TREE.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        hits, _ = check(root)
        got = sorted((str(rel), number, rule) for rel, number, rule, _ in hits)
        if got != sorted(SELF_TEST_EXPECTED):
            print("FAIL: check() reported:\n  " + "\n  ".join(map(str, got)) +
                  "\nexpected:\n  " + "\n  ".join(map(str, sorted(SELF_TEST_EXPECTED))))
            return 1
    print(f"OK: self-test: {len(SELF_TEST_EXPECTED)} violations found; comments, strings, "
          "test files, non-engine headers and folders the map names ignored")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=SOURCE_ROOT)
    parser.add_argument("--rule", choices=RULES, help="check one rule only (default: all)")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    return self_test() if args.self_test else report(args.root.resolve(), args.rule)


if __name__ == "__main__":
    sys.exit(main())
