"""``python -m pt_onnxscript inspect model.onnx``: the report of an ONNX model file
(pt_onnxscript.report), in Markdown or, with --json, JSON; --run runs it in runtimes of
the portability matrix on inputs generated from its input specs."""

import argparse
import json
import sys

from pt_onnxscript import report
from pt_onnxscript.runtimes import RUNTIMES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pt_onnxscript", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="report on an ONNX model file")
    inspect.add_argument("model", help="the .onnx file")
    inspect.add_argument("--json", action="store_true", help="print JSON, not Markdown")
    inspect.add_argument(
        "--run",
        nargs="+",
        choices=RUNTIMES,
        metavar="RUNTIME",
        help=f"run the model in these runtimes ({', '.join(RUNTIMES)}) on generated inputs "
        "and compare each with ONNX Runtime",
    )
    inspect.add_argument("--seed", type=int, default=0, help="seed of the generated inputs")
    args = parser.parse_args(argv)
    try:
        runs = None
        if args.run:
            runs = report.run_in(args.model, args.run, report.sample_feeds(args.model, args.seed))
        described = report.describe(args.model, runs=runs)
    except (OSError, ValueError) as err:
        print(f"python -m pt_onnxscript inspect: {err}", file=sys.stderr)
        return 2
    print(json.dumps(described, indent=2) if args.json else report.to_markdown(described), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
