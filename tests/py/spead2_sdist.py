"""Fetches spead2's own test suite: the `tests/` folder and `pyproject.toml` (its pytest
settings) of spead2's source distribution from the package index pip uses, checked
against a pinned SHA-256.

Usage: spead2_sdist.py VERSION SHA256 DEST
DEST must not exist; it is created whole (a temporary folder renamed at the end) or not
at all. The index is PIP_INDEX_URL's, or PyPI's simple index.
"""

import hashlib
import html.parser
import io
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request


class Links(html.parser.HTMLParser):
    """The href of every <a> of a simple-index page."""

    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def sdist_url(index, version):
    page_url = index.rstrip("/") + "/spead2/"
    with urllib.request.urlopen(page_url, timeout=120) as r:
        links = Links()
        links.feed(r.read().decode("utf-8", "replace"))
    name = f"spead2-{version}.tar.gz"
    for href in links.hrefs:
        url = urllib.parse.urljoin(page_url, href)
        if urllib.parse.urlparse(url).path.endswith("/" + name):
            return url.split("#", 1)[0]
    sys.exit(f"spead2_sdist: {page_url} lists no {name}")


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: spead2_sdist.py VERSION SHA256 DEST")
    version, sha256, dest = sys.argv[1:]
    if os.path.exists(dest):
        sys.exit(f"spead2_sdist: {dest} exists already")
    index = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple"
    url = sdist_url(index, version)
    with urllib.request.urlopen(url, timeout=300) as r:
        data = r.read()
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        sys.exit(f"spead2_sdist: {url} has SHA-256 {got}, not the pinned {sha256}")
    top = f"spead2-{version}/"
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".spead2-sdist-", dir=parent)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            wanted = [
                m
                for m in tar.getmembers()
                if (m.name.startswith(top + "tests/") or m.name == top + "pyproject.toml")
                and m.isfile()
            ]
            for m in wanted:
                out = os.path.join(tmp, m.name[len(top) :])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with tar.extractfile(m) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


if __name__ == "__main__":
    main()
