"""The error hierarchy: generated from the C++ code list, raised by name,
carried through handlers, described by the stubs."""

import ast
import inspect
import pickle
from pathlib import Path

import pytest

import mcdma
from mcdma import _mcdma
from conftest import uniq

ERROR_CODES = [code for code in mcdma.Code if code != mcdma.Code.OK]


def class_name(code_name: str) -> str:
    return "".join(part.capitalize() for part in code_name.split("_"))


def test_code_enum_is_the_extensions_code_list():
    assert [(c.name, c.value) for c in mcdma.Code] == _mcdma.codes()
    assert _mcdma.codes()[0] == ("OK", 0)
    # The names status.hpp documents, spot-checked.
    for name in ("NOT_FOUND", "TIMEOUT", "OUT_OF_RANGE", "PERMISSION_DENIED", "LINK_DOWN",
                 "UNAVAILABLE", "CANCELLED", "REVOKED"):
        assert name in mcdma.Code.__members__


def test_reason_enum_is_the_extensions_reason_list():
    assert [(r.name, r.value) for r in mcdma.Reason] == _mcdma.reasons()
    assert _mcdma.reasons()[0] == ("NONE", 0)
    for name in ("NO_SUCH_SERVICE", "NOT_LINKED"):
        assert name in mcdma.Reason.__members__
    assert mcdma.Error("x").reason == mcdma.Reason.NONE
    err = mcdma.error_from(int(mcdma.Code.NOT_FOUND), "gone", int(mcdma.Reason.NO_SUCH_SERVICE))
    assert type(err) is mcdma.NotFound and err.reason == mcdma.Reason.NO_SUCH_SERVICE
    # A reason this build does not know (a newer library's) reads NONE.
    assert mcdma.error_from(int(mcdma.Code.NOT_FOUND), "m", 60000).reason == mcdma.Reason.NONE


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_every_code_has_its_error_class(code):
    cls = getattr(mcdma, class_name(code.name))
    assert issubclass(cls, mcdma.Error) and cls.code == code
    assert cls.__module__ == "mcdma" and cls.__doc__
    err = cls("what happened")
    assert (err.code, err.message) == (code, "what happened")
    assert str(err) == f"{code.name}: what happened"
    assert mcdma.error_from(int(code), "m").__class__ is cls
    assert cls.__name__ in mcdma.__all__


def test_errors_survive_pickling():
    err = pickle.loads(pickle.dumps(mcdma.LinkDown("peer host-b")))
    assert type(err) is mcdma.LinkDown and err.message == "peer host-b"
    custom = pickle.loads(pickle.dumps(mcdma.Error("x", code=mcdma.Code.BUSY)))
    assert custom.code == mcdma.Code.BUSY
    reasoned = pickle.loads(pickle.dumps(
        mcdma.NotFound("y", reason=mcdma.Reason.NOT_LINKED)))
    assert (type(reasoned), reasoned.reason) == (mcdma.NotFound, mcdma.Reason.NOT_LINKED)


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_handler_errors_reach_the_caller_as_the_same_class(client, connect, code):
    server = connect()
    service = uniq("err")
    cls = type(mcdma.error_from(int(code), ""))

    def handler(req, info):
        raise cls(f"handler says {code.name}")

    server.serve(service, handler)
    with pytest.raises(cls, match=f"handler says {code.name}") as caught:
        client.call(service)
    assert caught.value.code == code


def test_base_error_with_a_code_answers_that_code(client, connect):
    server = connect()
    service = uniq("base")

    def handler(req, info):
        raise mcdma.Error("slow down", code=mcdma.Code.BUSY)

    server.serve(service, handler)
    with pytest.raises(mcdma.Busy, match="slow down"):
        client.call(service)


def stub_names(path: Path):
    tree = ast.parse(path.read_text())
    names = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    names |= {node.target.id for node in tree.body
              if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    return names


def test_stubs_name_every_class_and_function():
    package = Path(mcdma.__file__).parent
    assert (package / "py.typed").exists()
    errors_stub = stub_names(package / "_errors.pyi")
    assert {class_name(c.name) for c in ERROR_CODES} | {"Code", "Error"} <= errors_stub
    stub_tree = ast.parse((package / "_errors.pyi").read_text())

    def members_in_stub(enum_name):
        return {
            target.id
            for node in ast.walk(stub_tree)
            if isinstance(node, ast.ClassDef) and node.name == enum_name
            for stmt in node.body if isinstance(stmt, ast.Assign)
            for target in stmt.targets
        }

    assert members_in_stub("Code") == set(mcdma.Code.__members__)
    assert members_in_stub("Reason") == set(mcdma.Reason.__members__)
    stub_all = next(ast.literal_eval(node.value)
                    for node in ast.parse((package / "_errors.pyi").read_text()).body
                    if isinstance(node, ast.Assign) and node.targets[0].id == "__all__")
    assert stub_all == mcdma._errors.__all__
    ext_stub = stub_names(package / "_mcdma.pyi")
    public = {n for n in dir(_mcdma) if not n.startswith("__")}
    assert public <= ext_stub, public - ext_stub


def test_every_public_name_has_a_docstring():
    missing = []
    for name in mcdma.__all__:
        obj = getattr(mcdma, name)
        if isinstance(obj, str):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if isinstance(obj, type):
            for attr in dir(obj):
                member = inspect.getattr_static(obj, attr)
                if attr.startswith("_") or not (callable(member) or isinstance(member, property)):
                    continue
                if not (getattr(member, "__doc__", "") or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, missing
