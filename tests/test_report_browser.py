"""The quality report of a real `bioel link` run on the committed sample, opened in headless Chromium (driven by
Playwright): its verdict, figures and plots are visible, and the page makes no request but for itself.

Needs the system Chromium (Debian package `chromium`, /usr/bin/chromium) and the `playwright` package (the
`test` extra; its own browser download is not used). Skipped, saying which is missing, without them."""

import json
import shutil
from pathlib import Path

import pytest

from bioel_core.index import IndexSpec
from bioel_core.models import TransformerEncoder
from conftest import SAMPLE_DATA, report_figures
from pipelines import build_index, cli, embed_names, ingest_kb
from pipelines.options import pipeline_options
from test_models import make_tiny_bert

CHROMIUM = Path("/usr/bin/chromium")
# no sync, updates, field trials or other calls home: the only requests left are the page's own
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BAD_LINE = '{"pmid": "99", "title": "cut short'

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def sync_playwright():
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    return api.sync_playwright


@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
    """`bioel link` as scripts/demo.sh step 4 runs it, on the sample abstracts plus one broken record (a dead
    letter), with a tiny model's index of the MEDIC sample; its quality report is written by the verb itself."""
    root = tmp_path_factory.mktemp("browser")
    model = str(TransformerEncoder(make_tiny_bert(root / "tiny-bert"), pooling="mean").save(root / "model"))
    options = pipeline_options([])
    ingest_kb.run("medic-biosyn", [str(SAMPLE_DATA / "medic_sample.txt")], str(root / "kb"), options, num_shards=2)
    embed_names.run(model, str(root / "kb"), str(root / "emb"), options, num_shards=2)
    build_index.run(str(root / "emb"), str(root / "index"), options, num_shards=2, spec=IndexSpec("flat"))
    abstracts = root / "abstracts.jsonl"
    shutil.copy(SAMPLE_DATA / "abstracts_sample.jsonl", abstracts)
    with open(abstracts, "a") as fh:
        fh.write(BAD_LINE + "\n")
    out = root / "links"
    code = cli.main(
        [
            "link",
            "--model",
            model,
            "--input",
            str(abstracts),
            "--input-format",
            "jsonl",
            "--index",
            f"Disease={root / 'index'}",
            "--stop-list",
            f"Disease={SAMPLE_DATA.parent / 'models/stoplists/disease-medic.json'}",
            "--output",
            str(out),
            "--output-format",
            "pubtator",
        ]
    )
    assert code == 0
    return json.loads((out / "quality" / "summary.json").read_text())


def test_the_link_report_renders_offline_with_its_figures_and_plots(sync_playwright, link_run):
    summary, page_path = link_run, Path(link_run["html"])
    stats = summary["stats"]
    assert stats["documents"] == 40 and stats["mentions"] > 0 and stats["dead_letters"] == 1
    expected_plots = 6  # scores, NIL share, link kinds, mentions per document, top concepts, dead-letter reasons
    url = page_path.resolve().as_uri()

    requests, failed = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
            context.on("request", lambda r: requests.append(r.url))
            context.on("requestfailed", lambda r: failed.append(r.url))
            # anything but the page itself is refused here, recorded above first, so a leak fails the test
            # instead of reaching the network
            context.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
            page = context.new_page()
            page.goto(url, wait_until="networkidle")  # late requests (CSS backgrounds) too

            banner = page.locator("#verdict")
            assert banner.is_visible() and banner.inner_text().startswith("PASSED")
            # the inline style applies: the GE data docs it replaces rendered blank without their CDN CSS
            assert banner.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(46, 125, 50)"

            shown = {
                row.locator("td").nth(0).inner_text(): row.locator("td").nth(1).inner_text()
                for row in page.locator("#figures tbody tr").all()
            }
            assert shown["mentions"] == f"{stats['mentions']:,}" and shown["documents"] == "40"
            assert shown == report_figures(page_path.read_text())

            figures = page.locator("#plots figure")
            captions = figures.locator("figcaption").all_inner_texts()
            assert len(captions) == expected_plots and figures.locator("svg").count() == expected_plots
            assert captions[0] == "Link scores per entity type" and captions[-1] == "Dead letters by reason kind (1 in all)"
            for caption, figure in zip(captions, figures.all()):
                svg = figure.locator("svg")
                svg.scroll_into_view_if_needed()
                box, viewport = svg.bounding_box(), page.viewport_size
                assert box and box["width"] > 200 and box["height"] > 150, (caption, box)
                assert 0 <= box["y"] and box["y"] + min(box["height"], viewport["height"]) <= viewport["height"] + 1
                # drawn: the plot's own title is text laid out inside the SVG
                title = svg.locator("text", has_text=caption)
                assert title.count() == 1 and title.bounding_box()["width"] > 50, caption
            # bars and histogram steps are paths with area: more than the plot background and the axes
            painted = "s => Array.from(s.querySelectorAll('path')).filter(p => p.getBBox().width * p.getBBox().height > 0).length"
            for caption in ("Link scores per entity type", "Most linked concepts"):
                assert figures.filter(has_text=caption).locator("svg").evaluate(painted) > 2, caption

            assert page.locator("#checks tbody tr").count() == len(summary["checks"])
            assert page.get_by_text("Sample dead letters (first 1 of 1)").is_visible()
        finally:
            browser.close()

    assert requests == [url] and failed == []
