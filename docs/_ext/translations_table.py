"""The table of translations, generated from pt_onnxscript's registry at each build: every
Op class (tensor Ops, scalar Ops of Elemwise and Composite, the core Ops of Blockwise, and
the functions of OpFromGraph) with the module of its translation and the first sentence of
that translation's docstring, so the page cannot drift from the code.

In a page: a fenced ``{translations-table}`` directive.
"""

from docutils import nodes
from docutils.parsers.rst import Directive


def _first_sentence(text: str | None) -> str:
    if not text:
        return ""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    return paragraph


class TranslationsTable(Directive):
    has_content = False

    def run(self):
        from pt_onnxscript.registry import translations

        table = nodes.table()
        group = nodes.tgroup(cols=4)
        table += group
        for width in (20, 12, 22, 46):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        body = nodes.tbody()
        group += body

        def row(cells, parent):
            tr = nodes.row()
            for cell in cells:
                entry = nodes.entry()
                entry += nodes.paragraph(text=cell)
                tr += entry
            parent += tr

        row(["Op", "kind", "translation", "what it does"], head)
        for entry in translations():
            row(
                [entry["op"], entry["kind"], entry["translation"], _first_sentence(entry["doc"])],
                body,
            )
        return [table]


def setup(app):
    app.add_directive("translations-table", TranslationsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
