"""The proof points' command line: -b/--build builds only, -e/--execute runs a built model."""

import argparse


def parse_args() -> dict:
    parser = argparse.ArgumentParser(description="Build and/or run a GroqFlow proof point")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-b", "--build", action="store_true",
                       help="Build the model (rebuild if needed) without executing it")
    group.add_argument("-e", "--execute", action="store_true",
                       help="Execute a model built before (rebuild=\"never\")")
    args = parser.parse_args()
    if args.build:
        return {"rebuild_policy": "if_needed", "should_execute": False}
    if args.execute:
        return {"rebuild_policy": "never", "should_execute": True}
    return {"rebuild_policy": "if_needed", "should_execute": True}
