#!/usr/bin/env python3
"""Reads a TensorBoard event file with TensorBoard's own loader and prints what it found, one line
per item, for tests/train/tensorboard_writer_test.cpp to compare with what ds2 wrote:

    file_version brain.Event:2
    session_start <step>
    scalar <step> <tag> <value, 9 significant digits>
    records <count>

Usage: read_tfevents.py EVENT_FILE. Exits 77 with "SKIP: ..." when the tensorboard package is not
importable (the calling test then skips and says why)."""
import sys

SKIP_EXIT = 77


def scalar_of(value):
    """The float of a Summary.Value, from simple_value or (after TensorBoard's read-time
    migration) from a scalar tensor."""
    if value.HasField("simple_value"):
        return value.simple_value
    from tensorboard.util import tensor_util

    return float(tensor_util.make_ndarray(value.tensor))


def main(argv):
    if len(argv) != 2:
        print("usage: read_tfevents.py EVENT_FILE", file=sys.stderr)
        return 2
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError as e:
        print("SKIP: the tensorboard python package is not importable (%s); "
              "pip install tensorboard to run this check" % e)
        return SKIP_EXIT
    records = 0
    for event in EventFileLoader(argv[1]).Load():
        records += 1
        if event.HasField("file_version"):
            print("file_version", event.file_version)
        if event.HasField("session_log") and event.session_log.status == event.session_log.START:
            print("session_start", event.step)
        for value in event.summary.value:
            print("scalar %d %s %.9g" % (event.step, value.tag, scalar_of(value)))
    print("records", records)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
