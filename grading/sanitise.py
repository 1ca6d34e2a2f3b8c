"""The one HTML sanitiser of the grading tool: feedback pages (``grading/feedback.py``, which re-exports it) and
the class report (``grading/report.py``) put every student-controlled piece of HTML through :func:`sanitise`.

It lives in a module of its own so that the class report can use it without importing nbconvert (about
1.6 s of CPU, a third of the report's budget for a class of 1,000: tests/benchmarks/bench_report.py).
"""
from __future__ import annotations

TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "q", "s", "samp",
        "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
        "u", "ul", "var"}
ATTRIBUTES = {"*": {"class", "title"}, "a": {"href"}, "img": {"src", "alt", "width", "height"},
              "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align"},
              "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


def sanitise(html) -> str:
    """Student-controlled HTML made safe to show: allowlisted tags and attributes, http/https/mailto links."""
    import nh3

    if isinstance(html, bytes):
        html = html.decode("utf-8", "replace")
    return nh3.clean(str(html), tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     clean_content_tags={"script", "style", "noscript", "template", "textarea", "title", "xmp",
                                         "iframe", "object", "embed", "svg", "math"},
                     link_rel="noopener noreferrer nofollow", strip_comments=True)
