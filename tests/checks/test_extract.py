"""Table-driven tests of the text extraction: test ids, error lines, file:line refs, masking.

Fixtures are written by hand in each tool's documented output format; the shapes of the
Go/golangci-lint and vitest/tsc ones follow what real agent sessions showed. A last test
runs the extraction over the real sessions when they are present.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require_sessions
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tma1.checks import (
    error_line,
    error_line_for_test,
    error_line_of_file,
    extract_test_ids,
    file_of_test_id,
    files_read_by,
    has_failure_markers,
    is_masked_failure,
    located_in,
    refs,
    runs_build_or_test,
    runs_only_plumbing,
    split_shell,
    strip_ansi,
)

# --- outputs ---------------------------------------------------------------------------

GO_VERBOSE = """\
=== RUN   TestParse
--- FAIL: TestParse (0.00s)
    parse_test.go:14: got 3, want 4
=== RUN   TestRender
--- PASS: TestRender (0.00s)
FAIL
FAIL\texample.com/app/internal/parse\t0.012s
ok  \texample.com/app/internal/render\t0.008s
FAIL
"""

GO_SUBTESTS = """\
time=2025-07-21T14:24:33.688-05:00 level=ERROR source=:0 msg="Alert triggered" component=mgr
--- FAIL: TestServe (0.10s)
    --- FAIL: TestServe/with_target_files (0.00s)
        serve_test.go:40: expected server to start
    --- FAIL: TestServe/no_files (0.00s)
FAIL
FAIL\texample.com/app/internal/services\t0.123s
"""

GO_BUILD_FAILED = """\
# example.com/app/internal/plugins [example.com/app/internal/plugins.test]
internal/plugins/integration_test.go:215:3: undefined: err
internal/plugins/integration_test.go:216:21: undefined: err

ok  \texample.com/app\t1.386s
?   \texample.com/app/components\t[no test files]
FAIL\texample.com/app/internal/plugins [build failed]
FAIL
"""

GO_TWO_PACKAGES = """\
--- FAIL: TestAlpha (0.00s)
    alpha_test.go:9: boom
FAIL
FAIL\texample.com/app/alpha\t0.010s
panic: test timed out after 10m0s
FAIL\texample.com/app/beta\t600.012s
FAIL
"""

GO_BUILD = """\
# example.com/templar/internal/config
internal/config/plugins.go:4:2: "fmt" imported and not used
internal/config/plugins.go:5:2: "path/filepath" imported and not used
"""

GOLANGCI = """\
internal/monitoring/alerting.go:495:46: "POST" can be replaced by http.MethodPost (usestdlibvars)
\treq, err := http.NewRequestWithContext(ctx, "POST", wc.url, body)
\t                                            ^
1 issues:
* usestdlibvars: 1
"""

PYTEST_SUMMARY = """\
=================================== FAILURES ===================================
_______________________________ test_create_user _______________________________
    def test_create_user(client):
>       assert client.post("/users").status_code == 201
E       assert 500 == 201
tests/test_api.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_api.py::test_create_user - assert 500 == 201
FAILED tests/test_api.py::TestAuth::test_login[admin] - KeyError: 'token'
ERROR tests/test_db.py::test_migrate - sqlalchemy.exc.OperationalError: no such table
=============== 2 failed, 10 passed, 1 error in 1.23s ===============
"""

PYTEST_VERBOSE = """\
tests/test_api.py::test_create_user FAILED                               [ 50%]
tests/test_api.py::test_list PASSED                                      [100%]
=========================== short test summary info ============================
FAILED tests/test_api.py::test_create_user - assert 500 == 201
========================= 1 failed, 1 passed in 0.05s ==========================
"""

PYTEST_COLLECTION = """\
==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_broken.py _____________________
ImportError while importing test module '/app/tests/test_broken.py'.
E   ModuleNotFoundError: No module named 'foo'
=========================== short test summary info ============================
ERROR tests/test_broken.py - ModuleNotFoundError: No module named 'foo'
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
"""

UNITTEST_310 = """\
.F.E
======================================================================
ERROR: test_load (tests.test_config.ConfigTest)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/app/tests/test_config.py", line 20, in test_load
    load("missing.toml")
  File "/app/config.py", line 8, in load
    return open(path).read()
FileNotFoundError: [Errno 2] No such file or directory: 'missing.toml'

======================================================================
FAIL: test_parse (tests.test_config.ConfigTest)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/app/tests/test_config.py", line 12, in test_parse
    self.assertEqual(parse("x"), 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 4 tests in 0.002s

FAILED (failures=1, errors=1)
"""

UNITTEST_311 = """\
======================================================================
FAIL: test_parse (tests.test_config.ConfigTest.test_parse)
----------------------------------------------------------------------
AssertionError: 3 != 4

FAILED (failures=1)
"""

JEST_MULTI = """\
FAIL src/utils/sum.test.js
  ● sum › adds 1 + 2 to equal 3

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 4

      3 | test('adds 1 + 2 to equal 3', () => {
    > 4 |   expect(sum(1, 2)).toBe(3);
        |                     ^

      at Object.<anonymous> (src/utils/sum.test.js:4:21)

PASS src/utils/math.test.js
Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 5 passed, 6 total
"""

JEST_VERBOSE = """\
FAIL src/utils/sum.test.js (5.2 s)
  sum
    ✓ adds 0 + 0 (2 ms)
    ✕ adds 1 + 2 to equal 3 (5 ms)

  ● sum › adds 1 + 2 to equal 3

    expect(received).toBe(expected) // Object.is equality
"""

JEST_SUITE_FAILED = """\
FAIL src/api/client.test.ts
  ● Test suite failed to run

    Cannot find module './client' from 'src/api/client.test.ts'

Test Suites: 1 failed, 1 total
"""

JEST_BULLETS_ONLY = """\
FAIL src/cart.test.ts
    ✕ applies the discount (12 ms)
    ✕ rounds to cents (1 ms)
"""

VITEST = """\
 ❯ test/perf/regression.test.ts (13 tests | 2 failed) 45ms
   × Perf Regression > CRUD > should create record within budget 11ms
   × Perf Regression > Search > should validate parameters quickly 5ms

⎯⎯⎯⎯⎯⎯⎯ Failed Tests 2 ⎯⎯⎯⎯⎯⎯⎯

 FAIL  test/perf/regression.test.ts > Perf Regression > CRUD > should create record within budget
AssertionError: expected undefined to be defined
 ❯ test/perf/regression.test.ts:120:31

 FAIL  test/perf/regression.test.ts > Perf Regression > Search > should validate parameters quickly
AssertionError: expected 'x' to contain 'y'

 Test Files  1 failed (1)
      Tests  2 failed | 11 passed (13)
"""

VITEST_GREPPED = """\
 × test/perf/regression.test.ts > Perf Regression > CRUD > should create record within budget 6ms
 FAIL  test/perf/regression.test.ts > Perf Regression > CRUD > should create record within budget
"""

VITEST_FILE_FAILED = """\
 FAIL  test/setup.test.ts [ test/setup.test.ts ]
Error: Cannot find package 'msw' imported from /app/test/setup.test.ts
 Test Files  1 failed (1)
"""

VITEST_ANSI = (
    "\x1b[31m FAIL \x1b[39m test/a.test.ts\x1b[2m > \x1b[22mA\x1b[2m > \x1b[22mworks\n"
    "\x1b[31mAssertionError\x1b[39m: expected 1 to be 2\n"
)

CARGO = """\
running 3 tests
test tests::parses_empty ... ok
test tests::parses_header ... FAILED
test net::tests::retries ... FAILED

failures:

---- tests::parses_header stdout ----
thread 'tests::parses_header' panicked at src/lib.rs:42:9:
assertion `left == right` failed
  left: 3
 right: 4

failures:
    tests::parses_header
    net::tests::retries

test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out

error: test failed, to rerun pass `--lib`
"""

RSPEC = """\
Failures:

  1) User validates email presence
     Failure/Error: expect(user).not_to be_valid
       expected #<User id: nil> not to be valid
     # ./spec/models/user_spec.rb:12:in `block (2 levels) in <top (required)>'

Finished in 0.05 seconds (files took 0.5 seconds to load)
5 examples, 1 failure

Failed examples:

rspec ./spec/models/user_spec.rb:12 # User validates email presence
"""

MOCHA = """\
  Array
    #indexOf()
      ✓ should return the index when present
      1) should return -1 when the value is not present


  1 passing (9ms)
  2 failing

  1) Array
       #indexOf()
         should return -1 when the value is not present:

      AssertionError [ERR_ASSERTION]: 0 == -1
      + expected - actual

  2) works at top level:
     Error: nope
"""

PHPUNIT = """\
PHPUnit 10.5.2 by Sebastian Bergmann and contributors.

..F.F                                                               5 / 5 (100%)

There were 2 failures:

1) Tests\\Unit\\CartTest::testTotalIncludesTax
Failed asserting that 100 matches expected 119.

/app/tests/Unit/CartTest.php:27

2) Tests\\Unit\\CartTest::testDiscount with data set #1 (10, 5)
Failed asserting that 6 matches expected 5.

/app/tests/Unit/CartTest.php:41

FAILURES!
Tests: 5, Assertions: 5, Failures: 2.
"""

TSC = """\
> attio-mcp@0.2.0 build
> tsc

src/objects/people-write.ts(158,9): error TS2322: Type '{ id: string; }' is not assignable \
to type 'string'.
src/objects/people/types.ts(105,27): error TS2345: Argument of type 'X' is not assignable.
  Type '{ id: string; }' is not assignable to type 'string'.
"""

TSC_PRETTY = """\
src/index.ts:4:38 - error TS2307: Cannot find module 'axios' or its corresponding type declarations.

4 import axios from 'axios';
                         ~~~~~~~

Found 1 error in src/index.ts:4
"""

RUSTC = """\
   Compiling demo v0.1.0 (/work/demo)
error[E0308]: mismatched types
 --> src/main.rs:4:18
  |
4 |     let x: i32 = "five";
  |            ---   ^^^^^^ expected `i32`, found `&str`

error: could not compile `demo` (bin "demo") due to 1 previous error
"""

GCC = """\
main.c: In function 'main':
main.c:5:5: error: 'y' undeclared (first use in this function)
    5 |     y = 3;
      |     ^
main.c:5:5: note: each undeclared identifier is reported only once
make: *** [Makefile:4: main] Error 1
"""

CLANG = """\
src/app.cpp:3:10: fatal error: 'missing.h' file not found
#include "missing.h"
         ^~~~~~~~~~~
1 error generated.
"""

PY_TRACEBACK = """\
Traceback (most recent call last):
  File "/app/main.py", line 3, in <module>
    from app.models import User
  File "/app/app/models.py", line 27, in <module>
    class User(Base):
NameError: name 'Base' is not defined
"""

ESLINT_STYLISH = """\
/home/u/app/src/index.ts
  12:7  error    'unused' is assigned a value but never used  no-unused-vars
  20:1  warning  Unexpected console statement                 no-console

✖ 2 problems (1 error, 1 warning)
"""

ESLINT_COMPACT = (
    "/home/u/app/src/a.ts: line 173, col 73, Warning - Unexpected any. (no-explicit-any)\n"
    "/home/u/app/src/a.ts: line 180, col 5, Error - 'x' is not defined. (no-undef)\n"
    "\n2 problems\n"
)


# --- test identifiers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "ids"),
    [
        pytest.param(GO_VERBOSE, ["TestParse"], id="go-verbose"),
        pytest.param(
            GO_SUBTESTS,
            ["TestServe/with_target_files", "TestServe/no_files"],
            id="go-subtests-name-the-failure",
        ),
        # Nothing ran: a compile error is a broken build, not a stuck test.
        pytest.param(GO_BUILD_FAILED, [], id="go-build-failed-is-no-test"),
        pytest.param(GO_TWO_PACKAGES, ["TestAlpha", "example.com/app/beta"], id="go-packages"),
        pytest.param(
            PYTEST_SUMMARY,
            [
                "tests/test_api.py::test_create_user",
                "tests/test_api.py::TestAuth::test_login[admin]",
                "tests/test_db.py::test_migrate",
            ],
            id="pytest-summary",
        ),
        pytest.param(PYTEST_VERBOSE, ["tests/test_api.py::test_create_user"], id="pytest-verbose"),
        pytest.param(PYTEST_COLLECTION, ["tests/test_broken.py"], id="pytest-collection-error"),
        pytest.param(
            UNITTEST_310,
            ["tests.test_config.ConfigTest.test_load", "tests.test_config.ConfigTest.test_parse"],
            id="unittest-3.10",
        ),
        pytest.param(UNITTEST_311, ["tests.test_config.ConfigTest.test_parse"], id="unittest-3.11"),
        pytest.param(
            JEST_MULTI, ["src/utils/sum.test.js > sum > adds 1 + 2 to equal 3"], id="jest"
        ),
        pytest.param(
            JEST_VERBOSE,
            ["src/utils/sum.test.js > sum > adds 1 + 2 to equal 3"],
            id="jest-verbose-one-id",
        ),
        pytest.param(JEST_SUITE_FAILED, ["src/api/client.test.ts"], id="jest-suite-failed"),
        pytest.param(
            JEST_BULLETS_ONLY,
            ["src/cart.test.ts > applies the discount", "src/cart.test.ts > rounds to cents"],
            id="jest-bullets",
        ),
        pytest.param(
            VITEST,
            [
                "test/perf/regression.test.ts > Perf Regression > CRUD > "
                "should create record within budget",
                "test/perf/regression.test.ts > Perf Regression > Search > "
                "should validate parameters quickly",
            ],
            id="vitest",
        ),
        pytest.param(
            VITEST_GREPPED,
            [
                "test/perf/regression.test.ts > Perf Regression > CRUD > "
                "should create record within budget"
            ],
            id="vitest-grepped-once",
        ),
        pytest.param(VITEST_FILE_FAILED, ["test/setup.test.ts"], id="vitest-file-failed"),
        pytest.param(VITEST_ANSI, ["test/a.test.ts > A > works"], id="vitest-ansi"),
        pytest.param(CARGO, ["tests::parses_header", "net::tests::retries"], id="cargo"),
        pytest.param(RSPEC, ["./spec/models/user_spec.rb:12"], id="rspec"),
        pytest.param(
            MOCHA,
            [
                "Array #indexOf() should return -1 when the value is not present",
                "works at top level",
            ],
            id="mocha",
        ),
        pytest.param(
            PHPUNIT,
            ["Tests\\Unit\\CartTest::testTotalIncludesTax", "Tests\\Unit\\CartTest::testDiscount"],
            id="phpunit",
        ),
        pytest.param("FAIL\n", [], id="bare-FAIL-is-no-id"),
        pytest.param("FAIL\nFAIL\texample.com/x [setup failed]\n", [], id="go-setup-failed"),
        pytest.param(" Test Files  0 failed | 4 passed (4)\n", [], id="zero-failed"),
        pytest.param("ok  \texample.com/app\t0.1s\n--- PASS: TestX (0.0s)\n", [], id="go-pass"),
        pytest.param("FAILED (failures=1)\n", [], id="unittest-summary-is-no-id"),
        pytest.param(GO_BUILD, [], id="compile-error-no-id"),
    ],
)
def test_extract_test_ids(output: str, ids: list[str]) -> None:
    assert extract_test_ids(output) == ids


def test_one_output_counts_each_id_once() -> None:
    doubled = PYTEST_VERBOSE + PYTEST_VERBOSE + VITEST_GREPPED + VITEST_GREPPED
    ids = extract_test_ids(doubled)
    assert len(ids) == len(set(ids)) == 2


def test_unittest_formats_of_two_python_versions_agree() -> None:
    assert extract_test_ids(UNITTEST_311)[0] in extract_test_ids(UNITTEST_310)


@pytest.mark.parametrize(
    ("test_id", "path"),
    [
        ("tests/test_api.py::TestAuth::test_login[admin]", "tests/test_api.py"),
        ("tests/test_broken.py", None),
        ("test/perf/regression.test.ts > Perf > works", "test/perf/regression.test.ts"),
        ("src/api/client.test.ts", "src/api/client.test.ts"),
        ("./spec/models/user_spec.rb:12", "./spec/models/user_spec.rb"),
        ("TestServe/no_files", None),
        ("tests::parses_header", None),
        ("Tests\\Unit\\CartTest::testDiscount", None),
    ],
)
def test_file_of_test_id(test_id: str, path: str | None) -> None:
    assert file_of_test_id(test_id) == path


# --- error lines ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "line"),
    [
        pytest.param(
            TSC,
            "src/objects/people-write.ts(158,9): error TS2322: Type '{ id: string; }' is not "
            "assignable to type 'string'.",
            id="tsc",
        ),
        pytest.param(
            TSC_PRETTY,
            "src/index.ts:4:38 - error TS2307: Cannot find module 'axios' or its corresponding "
            "type declarations.",
            id="tsc-pretty",
        ),
        pytest.param(RUSTC, "error[E0308]: mismatched types --> src/main.rs:4:18", id="rustc"),
        pytest.param(
            GCC, "main.c:5:5: error: 'y' undeclared (first use in this function)", id="gcc"
        ),
        pytest.param(
            CLANG, "src/app.cpp:3:10: fatal error: 'missing.h' file not found", id="clang"
        ),
        pytest.param(PY_TRACEBACK, "NameError: name 'Base' is not defined", id="python-traceback"),
        pytest.param(
            UNITTEST_310,
            "FileNotFoundError: [Errno 2] No such file or directory: 'missing.toml'",
            id="unittest-traceback",
        ),
        pytest.param(PYTEST_SUMMARY, "E       assert 500 == 201", id="pytest"),
        pytest.param(
            GO_BUILD, 'internal/config/plugins.go:4:2: "fmt" imported and not used', id="go-build"
        ),
        pytest.param(
            GOLANGCI,
            'internal/monitoring/alerting.go:495:46: "POST" can be replaced by http.MethodPost '
            "(usestdlibvars)",
            id="golangci-lint",
        ),
        pytest.param(
            GO_BUILD_FAILED,
            "internal/plugins/integration_test.go:215:3: undefined: err",
            id="go-test-build",
        ),
        pytest.param(GO_SUBTESTS, "--- FAIL: TestServe (0.10s)", id="go-test-skips-log-lines"),
        pytest.param(
            ESLINT_STYLISH,
            "/home/u/app/src/index.ts:12:7: 'unused' is assigned a value but never used  "
            "no-unused-vars",
            id="eslint-stylish",
        ),
        pytest.param(
            ESLINT_COMPACT,
            "/home/u/app/src/a.ts: line 180, col 5, Error - 'x' is not defined. (no-undef)",
            id="eslint-compact",
        ),
        pytest.param(VITEST, "AssertionError: expected undefined to be defined", id="vitest"),
        pytest.param(JEST_MULTI, "● sum › adds 1 + 2 to equal 3", id="jest"),
        pytest.param(MOCHA, "AssertionError [ERR_ASSERTION]: 0 == -1", id="mocha"),
        pytest.param(
            CARGO,
            "thread 'tests::parses_header' panicked at src/lib.rs:42:9:",
            id="cargo-test",
        ),
        pytest.param(RSPEC, "Failure/Error: expect(user).not_to be_valid", id="rspec"),
        pytest.param(PHPUNIT, "Failed asserting that 100 matches expected 119.", id="phpunit"),
        pytest.param(
            'npm ERR! code ELIFECYCLE\nnpm ERR! Missing script: "tset"\n',
            'npm ERR! Missing script: "tset"',
            id="npm",
        ),
        pytest.param(
            "Exit code 1\n\nsomething odd happened\n", "something odd happened", id="first-line"
        ),
        pytest.param(
            'npm warn Unknown env config "store-dir".\n\n> Build error occurred\n'
            "[TypeError: generate is not a function]\n\n> app@0.1.0 build\n> next build\n",
            "[TypeError: generate is not a function]",
            id="next-build-behind-npm-warnings",
        ),
        pytest.param("Exit code 2\n", None, id="nothing-but-noise"),
    ],
)
def test_error_line(output: str, line: str | None) -> None:
    assert error_line(output) == line


def test_error_line_of_file_prefers_the_line_about_that_file() -> None:
    out = GO_BUILD + "internal/config/validation.go:381:6: validateServerConfig redeclared\n"
    assert error_line_of_file(out, "/p/internal/config/validation.go") == (
        "internal/config/validation.go:381:6: validateServerConfig redeclared"
    )
    assert error_line(out).startswith("internal/config/plugins.go:4:2")


def test_error_line_of_file_follows_its_stack_frame() -> None:
    out = (
        "src/utils/matcher.ts(5,30): error TS2307: Cannot find module 'string-similarity'.\n"
        "---\n"
        "file:///home/u/app/check-defaults.js:6\n"
        "const { apply } = require('./dist/config/defaults.js');\n"
        "                  ^\n\n"
        "ReferenceError: require is not defined in ES module scope, you can use import instead\n"
        "    at file:///home/u/app/check-defaults.js:6:19\n"
    )
    assert error_line_of_file(out, "/home/u/app/check-defaults.js") == (
        "ReferenceError: require is not defined in ES module scope, you can use import instead"
    )
    assert error_line(out).startswith("src/utils/matcher.ts(5,30): error TS2307")
    assert (
        str(located_in(out, "/home/u/app/check-defaults.js")) == "/home/u/app/check-defaults.js:6"
    )
    assert (
        error_line_of_file(PY_TRACEBACK, "/app/app/models.py")
        == "NameError: name 'Base' is not defined"
    )


def test_error_line_is_one_bounded_line() -> None:
    line = error_line("error: " + "x" * 1000)
    assert line is not None and len(line) <= 300 and "\n" not in line


@pytest.mark.parametrize(
    ("output", "test_id", "line"),
    [
        (PYTEST_SUMMARY, "tests/test_api.py::test_create_user", "assert 500 == 201"),
        (PYTEST_SUMMARY, "tests/test_api.py::TestAuth::test_login[admin]", "KeyError: 'token'"),
        (GO_VERBOSE, "TestParse", "parse_test.go:14: got 3, want 4"),
        (GO_SUBTESTS, "TestServe/with_target_files", "serve_test.go:40: expected server to start"),
        (GO_SUBTESTS, "TestServe/no_files", None),
        (
            VITEST,
            "test/perf/regression.test.ts > Perf Regression > Search > "
            "should validate parameters quickly",
            "AssertionError: expected 'x' to contain 'y'",
        ),
        (
            VITEST,
            "test/perf/regression.test.ts > Perf Regression > CRUD > "
            "should create record within budget",
            "AssertionError: expected undefined to be defined",
        ),
        (
            JEST_MULTI,
            "src/utils/sum.test.js > sum > adds 1 + 2 to equal 3",
            "expect(received).toBe(expected) // Object.is equality",
        ),
        (
            UNITTEST_310,
            "tests.test_config.ConfigTest.test_load",
            "FileNotFoundError: [Errno 2] No such file or directory: 'missing.toml'",
        ),
        (UNITTEST_310, "tests.test_config.ConfigTest.test_parse", "AssertionError: 3 != 4"),
        (
            CARGO,
            "tests::parses_header",
            "thread 'tests::parses_header' panicked at src/lib.rs:42:9:",
        ),
        (CARGO, "net::tests::retries", None),
        (
            PHPUNIT,
            "Tests\\Unit\\CartTest::testDiscount",
            "Failed asserting that 6 matches expected 5.",
        ),
        (PYTEST_SUMMARY, "tests/test_other.py::test_absent", None),
    ],
)
def test_error_line_for_test_quotes_that_tests_failure_or_nothing(
    output: str, test_id: str, line: str | None
) -> None:
    assert error_line_for_test(output, test_id) == line


# --- file:line references ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        pytest.param(
            GO_BUILD,
            [("internal/config/plugins.go", 4), ("internal/config/plugins.go", 5)],
            id="go",
        ),
        pytest.param(
            TSC,
            [("src/objects/people-write.ts", 158), ("src/objects/people/types.ts", 105)],
            id="tsc",
        ),
        pytest.param(PY_TRACEBACK, [("/app/main.py", 3), ("/app/app/models.py", 27)], id="python"),
        pytest.param(RUSTC, [("src/main.rs", 4)], id="rustc"),
        pytest.param(JEST_MULTI, [("src/utils/sum.test.js", 4)], id="jest-stack"),
        pytest.param(
            ESLINT_STYLISH,
            [("/home/u/app/src/index.ts", 12), ("/home/u/app/src/index.ts", 20)],
            id="eslint-stylish",
        ),
        pytest.param(
            ESLINT_COMPACT,
            [("/home/u/app/src/a.ts", 173), ("/home/u/app/src/a.ts", 180)],
            id="eslint-compact",
        ),
        pytest.param(
            PHPUNIT,
            [("/app/tests/Unit/CartTest.php", 27), ("/app/tests/Unit/CartTest.php", 41)],
            id="phpunit",
        ),
        pytest.param(
            "see http://localhost:8080/api and https://x.io:443/a.js\n", [], id="urls-are-not-refs"
        ),
        pytest.param("took 12:30:45 on v1.2.3\n", [], id="times-are-not-refs"),
    ],
)
def test_file_line_refs(output: str, expected: list[tuple[str, int]]) -> None:
    assert [(r.path, r.line) for r in refs(output)] == expected


def test_located_in_matches_by_path_suffix_and_keeps_python_style() -> None:
    def shown(output: str, path: str) -> str | None:
        ref = located_in(output, path)
        return None if ref is None else str(ref)

    assert shown(GO_BUILD, "/p/internal/config/plugins.go") == "internal/config/plugins.go:4"
    assert shown(GO_BUILD, "/p/cmd/plugins.go") is None  # same name, other directory
    assert shown("    plugins_test.go:14: got 3\n", "/p/x/plugins_test.go") == "plugins_test.go:14"
    assert shown(PY_TRACEBACK, "/app/app/models.py") == 'File "/app/app/models.py", line 27'
    assert shown(TSC, "/repo/src/objects/people-write.ts") == "src/objects/people-write.ts:158"


# --- masked failures ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "output", "masked"),
    [
        ("npm run test:offline 2>&1 | tail -30", VITEST, True),
        ("cd web && npx vitest run 2>&1 | tail -40", VITEST, True),
        ("npm run build 2>&1 | head -50", TSC, True),
        ("pytest -q | tail -3", "1 failed, 4 passed in 0.2s", True),
        ("python3 -m pytest tests/ -x 2>&1 | tail -5", PYTEST_SUMMARY, True),
        ("go test ./... 2>&1 | head -40", GO_VERBOSE, True),
        ("go build ./... 2>&1 | head -20", GO_BUILD, True),
        ("golangci-lint run --enable-only unused | head -30", GOLANGCI, True),
        ("cargo test 2>&1 | tail -20", CARGO, True),
        ("timeout 60 make test | tee out.log", GCC, True),
        ("FOO=1 uv run pytest -q || true", PYTEST_SUMMARY, True),
        ("bundle exec rspec; echo done", RSPEC, True),
        ("./vendor/bin/phpunit | tail", PHPUNIT, True),
        ("grep FAIL build.log", "FAIL src/x.test.ts\n--- FAIL: TestX", False),
        ("cat test-output.txt | grep -E 'FAIL|failed'", "3 failed\nFAIL src/a.test.ts", False),
        ("rg pytest -n", "FAILED tests/test_a.py::test_x", False),
        ("git log --grep=FAIL --oneline", "FAIL: fix flaky test", False),
        ("echo FAIL", "FAIL", False),
        ("npm test 2>&1 | tail -5", " Test Files  4 passed (4)\n      Tests  0 failed", False),
        ("pytest -q", "5 passed in 0.10s", False),
        (
            "npx eslint src --format compact",
            "/a/b.ts: line 1, col 1, Warning - any\n1 problem",
            False,
        ),
        ("go test ./...", None, False),
        (None, VITEST, False),
    ],
)
def test_is_masked_failure(command: str | None, output: str | None, masked: bool) -> None:
    assert is_masked_failure(command, output) is masked


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        ("npm test", True),
        ("pnpm exec vitest run src", True),
        ("bash -lc 'cargo clippy --all-targets'", True),
        ("sudo -E make", True),
        ("python manage.py test app", True),
        ("./gradlew build", True),
        ("npx tsc --noEmit", True),
        ("go test -run TestX ./pkg", True),
        ("node --test test/", True),
        ("git status && git diff", False),
        ("grep -rn 'go test' Makefile", False),
        ("ls -la node_modules/.bin/vitest", False),
        ("npm install", False),
        ("cat Makefile", False),
    ],
)
def test_runs_build_or_test(command: str, runs: bool) -> None:
    assert runs_build_or_test(command) is runs


@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("sed -n '1,200p' src/app.py", ["src/app.py"]),
        ("sed -e 's/a/b/' x.py", ["x.py"]),
        ("sed -i 's/a/b/' x.py", []),
        ("cat a.py b.py | head -50", ["a.py", "b.py"]),
        ("head -n 50 x.go", ["x.go"]),
        ("tail -n +5 -f log.txt", ["log.txt"]),
        ("nl -ba src/main.rs | sed -n '10,40p'", ["src/main.rs"]),
        ("cat a.py 2>/dev/null", ["a.py"]),
        ("cat a.py > b.py", ["a.py"]),
        ("cat > out.txt", []),
        ("rg foo src", []),
        ("python x.py", []),
        ("cat 'unterminated", []),
    ],
)
def test_files_read_by(command: str, files: list[str]) -> None:
    assert files_read_by(command) == files


_REFERENCE_OPERATORS = ("||", "&&", "|&", "$(", "<<<", "<<-", "<<", "|", ";", "(", ")", "\n", "`")
_HEREDOC_WORD_CHARS = set(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+/@%:,=~"
)


def _reference_heredoc_word(command: str, i: int) -> tuple[str, str]:
    """(the text of a heredoc's word after `<<` at i, the word itself), by hand."""
    j, n = i, len(command)
    while j < n and command[j] in " \t":
        j += 1
    if j < n and command[j] in "'\"":
        close = command.find(command[j], j + 1)
        newline = command.find("\n", j + 1)
        if close != -1 and (newline == -1 or close < newline):
            return command[i : close + 1], command[j + 1 : close]
        return "", ""
    k = j + 1 if j < n and command[j] == "\\" else j
    m = k
    while m < n and command[m] in _HEREDOC_WORD_CHARS:
        m += 1
    return (command[i:m], command[k:m]) if m > k else ("", "")


def _reference_body_end(command: str, i: int, word: str) -> int:
    """Where the body that starts at i ends: after the line that is `word` alone."""
    while i <= len(command):
        nl = command.find("\n", i)
        line = command[i:] if nl == -1 else command[i:nl]
        if line.strip(" \t") == word:
            return len(command) if nl == -1 else nl
        if nl == -1:
            return len(command)
        i = nl + 1
    return len(command)


def reference_split_shell(command: str) -> list[tuple[str, str]]:
    """The splitter's rules, one character at a time (the obvious, slow way): operators
    outside quotes split; a parenthesis inside a word, and the `)` closing it or closing
    nothing, is a character; a heredoc's body is left out."""
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    quote: str | None = None
    parens: list[bool] = []
    heredocs: list[str] = []
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < n:
                buf.append(command[i : i + 2])
                i += 2
                continue
            if ch == quote:
                quote = None
            buf.append(ch)
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            buf.append(ch)
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            buf.append(command[i : i + 2])
            i += 2
            continue
        op = next((o for o in _REFERENCE_OPERATORS if command.startswith(o, i)), None)
        if op in ("<<<", "<<-", "<<"):
            buf.append(op)
            i += len(op)
            if op != "<<<":
                text, word = _reference_heredoc_word(command, i)
                buf.append(text)
                i += len(text)
                if word:
                    heredocs.append(word)
            continue
        if op == "(" and "".join(buf)[-1:].strip():
            parens.append(True)
            op = None
        elif op in ("(", "$("):
            parens.append(False)
        elif op == ")" and (not parens or parens.pop()):
            op = None
        if op and not (op == "|" and buf and buf[-1].endswith(">")):
            out.append(("".join(buf), op))
            buf = []
            i += len(op)
            if op == "\n":
                for word in heredocs:
                    i = _reference_body_end(command, i, word)
                heredocs = []
            continue
        buf.append(ch)
        i += 1
    out.append(("".join(buf), ""))
    return out


_SHELLISH = st.text(alphabet=st.sampled_from(list("ab >|&;()$`'\"\\\n-=<\t")), max_size=40)


@settings(max_examples=3000, deadline=None)
@given(_SHELLISH)
def test_split_shell_matches_the_character_by_character_rules(command: str) -> None:
    assert split_shell(command) == reference_split_shell(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo a >| out.txt && ls",
        "echo \\>|x",
        'a "b\\"c|d" | e',
        "x 'unclosed | y",
        "trailing backslash \\",
        "$(cmd) $HOME & bg && fg |& tee",
    ],
)
def test_split_shell_edge_cases_match_the_reference(command: str) -> None:
    assert split_shell(command) == reference_split_shell(command)


def test_split_shell_respects_quotes() -> None:
    assert [s.strip() for s, _ in split_shell("echo 'a|b' && ls")] == ["echo 'a|b'", "ls"]
    assert [op for _, op in split_shell("a | b || c; d")] == ["|", "||", ";", ""]
    # An unbalanced quote (an agent's broken grep) keeps the rest together.
    broken = 'grep -n "a\\|b\\" src/x.rs | cat'
    assert len(split_shell(broken)) == 1
    assert runs_only_plumbing(broken)


@pytest.mark.parametrize(
    ("command", "plumbing"),
    [
        ("git stash pop", True),
        ("git checkout main && git pull origin main", True),
        ("rm -f a.js b.js", True),
        ("cd /tmp && ls -la | grep x", True),
        ("git add x.ts && git commit -m 'fix'", False),  # commit hooks run builds
        ("git push", False),
        ("npm run build", False),
        ("node script.js", False),
        ("", False),
    ],
)
def test_runs_only_plumbing(command: str, plumbing: bool) -> None:
    assert runs_only_plumbing(command) is plumbing


@pytest.mark.parametrize(
    ("output", "marked"),
    [
        ("1 failed, 2 passed", True),
        ("Tests: 0 failed, 6 passed", False),
        ("0 failed", False),
        ("✖ 2 problems (0 errors, 2 warnings)", False),
        ("✖ 1 problem (1 error, 0 warnings)", True),
        ("FAILURES!\nTests: 5, Assertions: 5, Failures: 2.", True),
        ("test result: FAILED. 1 passed; 2 failed", True),
        ("npm ERR! Missing script", True),
        ("panic: runtime error: index out of range", True),
        ("all good\n", False),
    ],
)
def test_has_failure_markers(output: str, marked: bool) -> None:
    assert has_failure_markers(output) is marked


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[31mFAIL\x1b[39m \x1b[2mx\x1b[22m") == "FAIL x"


# --- the real sessions -------------------------------------------------------------------


def _bash_results(path) -> list[tuple[str, str, bool]]:  # type: ignore[no-untyped-def]
    entries = json.loads(path.read_text())
    commands: dict[str, str] = {}
    out: list[tuple[str, str, bool]] = []
    for e in entries:
        content = (e.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and block.get("name") == "Bash":
                commands[block["id"]] = block["input"].get("command", "")
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in commands:
                text = block.get("content")
                if isinstance(text, list):
                    text = "\n".join(x.get("text", "") for x in text if isinstance(x, dict))
                out.append(
                    (commands[block["tool_use_id"]], text or "", bool(block.get("is_error")))
                )
    return out


def test_real_sessions_go_and_typescript() -> None:
    root = require_sessions() / "claude-code"
    templar = [r for p in sorted(root.glob("templar-*.chat.json")) for r in _bash_results(p)]
    attio = [r for p in sorted(root.glob("attio-*.chat.json")) for r in _bash_results(p)]
    if not templar or not attio:
        pytest.skip("templar/attio sessions missing")

    # Every failed `go build` quotes a located compiler line.
    builds = [(c, o) for c, o, err in templar if err and c.startswith("go build")]
    assert len(builds) >= 5
    for _, out in builds:
        assert re.match(r"^\S+\.go:\d+:\d+: \S", error_line(out) or ""), out[:200]
    # Failed golangci-lint runs point at a file and line too.
    lints = [o for c, o, err in templar if err and c.startswith("golangci-lint run --enable-only")]
    assert sum(1 for o in lints if refs(o)) >= 10

    # vitest runs piped through tail/grep exit 0: masked failures with test ids in a file.
    masked = [(c, o) for c, o, err in attio if not err and is_masked_failure(c, o)]
    assert len(masked) >= 5
    ids = [t for _, o in masked for t in extract_test_ids(o)]
    assert ids and all(" > " in t and ".test.ts" in t for t in ids if t.startswith("test/"))
    assert "FAIL" not in ids
    # Nothing that only reads logs or git counts as a masked failure.
    for c, _ in masked:
        assert not c.startswith(("git ", "grep ", "cat ")), c


# Pieces of every marker, odd case and odd letters included, in any order.
_MARKERISH = st.lists(
    st.sampled_from(
        ["FAIL", "fail", "FAİL", "faıl", "ED", "ed", "ing", "ures!", "1 ", "0 ", "error",
         "ERROR", "errors", "[ERROR]", "[E0308]", "error TS2304:", ":", "x.rs:3", "x.go:1:2: ",
         "Traceback (most recent call last):", "make", "ninja[2]", ": ***", "npm ERR!",
         "BUILD FAILED", "test result: FAILED", "panic: ", "--- ", " ", "\n", "\x1b[31m",
         "ok", "passed"]
    ),
    max_size=8,
).map("".join)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(_MARKERISH)
@example("1 FAİLED")
@example("2 faıling")
@example("ERRORS: 3 errors")
def test_the_quick_marker_test_never_hides_a_marker(output: str) -> None:
    from tma1.checks.outcome import _GUARDED_MARKERS

    whole = any(p.search(strip_ansi(output)) for _, p in _GUARDED_MARKERS)
    assert has_failure_markers(output) is whole


@pytest.mark.parametrize(
    "line",
    ["FAILURES!", "  --- FAIL: TestX", "3 failed", "Error: x", "a.ts(1,2): error TS2304: x",
     "x.rs:3:error: it broke", "a.go:1:2: x", "Traceback (most recent call last):",
     "make: *** [x] Error 1", "[ERROR] x", "npm ERR! x", "BUILD FAILED", "test result: FAILED.",
     "panic: x"],
)  # fmt: skip
def test_each_marker_alone_is_found(line: str) -> None:
    from tma1.checks.outcome import _GUARDED_MARKERS

    # Found, with its marker's words guarding the scan: a wrong word would hide it.
    assert has_failure_markers(f"ok\n{line}\nmore")
    assert any(p.search(f"ok\n{line}\nmore") for _, p in _GUARDED_MARKERS)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab -\t\n\r\x0b\x0c\x1c\x1f'\"\\#é|")), max_size=30))
def test_words_are_what_shlex_splits(segment: str) -> None:
    import shlex

    from tma1.checks.normalize import _words

    try:
        expected = shlex.split(segment)
    except ValueError:
        with pytest.raises(ValueError):
            _words(segment)
        return
    assert _words(segment) == expected


_LINEISH = st.lists(
    st.sampled_from(
        ["error", "Error", "ERROR", "E   ", "FAILED ", "FAIL", "x.py", "::t", " - ", "--- FAIL: ",
         "● ", "✕ ", "test ", " ... FAILED", "rspec ", "a/b.go:1:2: ", "src/x.ts(1,2)",
         ": error TS1: ", ":3:4 - ", "npm ERR! ", "code", "make: ***", "ninja[1]: ***",
         "Undefined", "not found", "panic: ", "thread 'x' panicked at", "Failed asserting that",
         "Failure/Error: ", "[warn] Code style issues", " > ", "1 failed", "2 failing",
         ": t (", "error[E0308]: ", "x.c:1: fatal error: ", " line 3, col 4, Error - ",
         "warning:", " ", "  ", "ok", "a"]
    ),
    max_size=6,
).map("".join)  # fmt: skip


# Case and Unicode corners of the IGNORECASE patterns: the long s (ſ) and the Kelvin sign
# (K) match s and k, the dotted capital I lowers to two characters.
_CASE_LINEISH = st.lists(
    st.sampled_from(
        ["error", "ERROR:", "Error[E1]:", "eRRor", "fail", "FAILED", "Failure", "failing",
         "undefined", "UNDEFINED", "cannot find", "Cannot Find", "not found", "No such",
         "no ſuch", "NO SUCH", "denied", "DENIED", "3", "0", " ", ":", "ſ", "K", "İ", "x",
         "_", "-", "é", "\t"]
    ),
    max_size=8,
).map("".join)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.one_of(_LINEISH, _CASE_LINEISH, st.text(max_size=40)))
@example("FAİLED")  # IGNORECASE takes the dotted capital I and the dotless i for an i
@example("build faıled")
@example("permission DENİED")
def test_one_test_per_error_tier_finds_what_any_of_its_patterns_does(line: str) -> None:
    from tma1.checks.locations import _TIER_TESTS

    for patterns, found in _TIER_TESTS.items():
        assert found(line) == any(p.search(line) for p in patterns)


@pytest.mark.parametrize(
    ("pattern", "anchored"),
    [
        (r"^a", True),
        (r"^(?:a|b)c", True),
        (r"^a|b", False),
        (r"^[|]a", True),
        (r"^\|a|b", False),
        (r"^a\|b", True),
        (r"a^", False),
        (r"\bfail", False),
    ],
)
def test_only_patterns_tied_to_the_line_start_are_tried_there_alone(
    pattern: str, anchored: bool
) -> None:
    from tma1.checks.text import LineTest, _starts_anchored

    p = re.compile(pattern)
    assert _starts_anchored(p) is anchored
    # And the test built from it agrees with a plain search either way.
    for line in ("a", "b", "xb", "|a", "ac", "bc", "x|b", "fail", "a|b"):
        assert LineTest((p,))(line) == bool(p.search(line))


@pytest.mark.parametrize(
    "patterns",
    [
        (r"^ab", r"^ac", r"^b"),  # "a" shared by the first two
        (r"^a+b", r"^ac"),  # a quantifier after the head: not shared
        (r"^a?c", r"^a{2}", r"^a"),
        (r"^a(?:b|c)d", r"^a|x"),  # the second is not tied to the start at all
    ],
)
def test_a_shared_head_is_scanned_once_and_matches_what_each_pattern_does(
    patterns: tuple[str, ...],
) -> None:
    from tma1.checks.text import LineTest

    compiled = tuple(re.compile(p) for p in patterns)
    test = LineTest(compiled, heads=("a",))
    for line in ("ab", "ac", "b", "aab", "aac", "c", "ad", "abd", "acd", "x", "zx", "a", "aa"):
        assert test(line) == any(p.search(line) for p in compiled), (patterns, line)


def _stylish_reference(lines: list[str]) -> list[str]:
    """`_eslint_stylish_errors` as first written: both patterns tried on every line."""
    from tma1.checks.locations import _STYLISH_ERROR, _STYLISH_FILE

    out: list[str] = []
    current: str | None = None
    for ln in lines:
        if m := _STYLISH_FILE.match(ln):
            current = m.group(1)
        elif current and (m := _STYLISH_ERROR.match(ln)):
            out.append(f"{current}:{m.group(1)}:{m.group(2)}: {m.group(3).strip()}")
    return out


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(
                ["src/a.ts", "/r/b.js", "C:\\x\\c.vue", "  ", "\t", " ", "3:4", "12:1",
                 "error", "warning", "  no-undef", "'x' is not defined", "x", ".", "\u00a0"]
            ),
            max_size=5,
        ).map("".join),
        max_size=8,
    )
)  # fmt: skip
def test_stylish_rows_are_found_as_when_every_line_was_tried_both_ways(lines: list[str]) -> None:
    from tma1.checks.locations import _eslint_stylish_errors

    assert _eslint_stylish_errors(lines) == _stylish_reference(lines)


def _lines_of(path: Path) -> Iterator[str]:
    """Every line of every JSON string in a session file (JSON or JSON Lines)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = []
        for line in text.splitlines():
            try:
                docs.append(json.loads(line))
            except ValueError:
                continue
    stack: list[object] = docs
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield from (ln.rstrip() for ln in strip_ansi(value).splitlines())
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def test_the_words_every_loose_tier_pattern_needs_are_in_every_corpus_line_it_matches() -> None:
    """`_NEEDS` is what makes the tier tests fast; a wrong word would hide real matches.
    Checked on every line of every tool output in the real session corpus."""
    from tma1.checks.locations import _NEEDS

    corpus = require_sessions()
    lines = {ln for f in corpus.rglob("*") if f.is_file() for ln in _lines_of(f)}
    assert len(lines) > 10_000
    checked = 0
    for p, words in _NEEDS.items():
        for ln in lines:
            if p.search(ln):
                checked += 1
                assert any(w in ln.lower() for w in words), (p.pattern, ln)
    assert checked > 100


_TEST_LINEISH = st.lists(
    st.sampled_from(
        ["--- FAIL: ", "TestX", "FAIL", "ok", "?", " ", "  ", "\t", "github.com/a/b",
         "[build failed]",
         "0.01s", "FAILED ", "ERROR ", "tests/t.py", "::test_a", " - boom", "ERROR: ", "test_a",
         " (pkg.mod)", "x.test.ts", " > ", "| web |", "● ", "✕ ", "× ", "test ", "a::b",
         " ... FAILED", "---- a::b stdout ----", "rspec ", "./spec/x_spec.rb:12", "1) ",
         "Ns\\FooTest::testBar", "2 failing", "a"]
    ),
    max_size=5,
).map("".join)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(_TEST_LINEISH)
def test_the_test_line_filter_lets_every_test_line_through(line: str) -> None:
    from tma1.checks import testids as extract

    patterns = (extract._GO_TEST, extract._GO_PKG_FAIL, extract._GO_PKG_DONE,
                extract._PYTEST_SUMMARY, extract._PYTEST_VERBOSE, extract._UNITTEST,
                extract._JS_FAIL, extract._JEST_DOT, extract._X_BULLET, extract._CARGO,
                extract._CARGO_STDOUT, extract._RSPEC, extract._PHPUNIT,
                extract._MOCHA_FAILING, extract._MOCHA_HEAD)  # fmt: skip
    assert bool(extract._ANY_TEST_LINE.match(line)) == any(p.match(line) for p in patterns)
