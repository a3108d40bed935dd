"""C/C++ text handling (kforge_desktop.csource): what the moved helpers had no test of."""

from __future__ import annotations

from kforge_desktop.csource.comments import blank_cpp_comments, strip_cpp_comments
from kforge_desktop.csource.items import function_head

CODE = ('#include <cstdio>  // for printf\n'
        'static const char* url = "http://example.com/*x*/";  /* a\n   block */\n'
        "static char slash = '/';\n")


def test_comments_go_and_string_and_character_literals_stay():
    text = strip_cpp_comments(CODE)
    assert "for printf" not in text and "block" not in text
    assert '"http://example.com/*x*/"' in text and "'/'" in text


def test_blanked_comments_keep_every_offset():
    text = blank_cpp_comments(CODE)
    assert len(text) == len(CODE)
    assert "printf" not in text and "block" not in text
    assert text.index("static char slash") == CODE.index("static char slash")


def test_function_head_is_the_declaration_without_its_comments():
    code = ("// sums a row; returns {the sum}\n"
            "static inline float row_sum(const float* x /* one row */,\n"
            "                            int64_t n) {\n    float s = 0.f;\n    return s;\n}\n")
    assert function_head(code, "row_sum") == "static inline float row_sum(const float* x , int64_t n) {"
    assert function_head(code, "missing") is None
