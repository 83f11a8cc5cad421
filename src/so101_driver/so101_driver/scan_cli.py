"""``so101 scan``: find Feetech servos on a port: ids, model numbers, firmware and baud rate.

    so101 scan --port /dev/ttyACM0                  # every STS baud rate, broadcast PING
    so101 scan --port /dev/ttyACM0 --baud 1000000 --ids 1-6 --no-broadcast
"""

from __future__ import annotations

import argparse
import sys

from so101_driver.bus import FeetechBus, ScanResult
from so101_driver.errors import DriverError
from so101_feetech.control_table import BAUD_RATES, MODEL_NUMBER_STS3215, decode_error_bits

__all__ = ["add_arguments", "run", "format_table", "parse_ids"]

MODEL_NAMES = {MODEL_NUMBER_STS3215: "STS3215"}


def parse_ids(text: str) -> list[int]:
    """``"1-6,8"`` → ``[1, 2, 3, 4, 5, 6, 8]``."""
    ids: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            ids.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"bad id list {text!r}: use e.g. 1-6,8") from err
    if not ids or not all(0 <= i <= 253 for i in ids):
        raise argparse.ArgumentTypeError(f"ids must be within 0..253, got {text!r}")
    return ids


def format_table(results: list[ScanResult]) -> str:
    lines = [f"{'ID':>3}  {'MODEL':<14} {'FIRMWARE':<9} {'BAUD':>8}  STATUS"]
    for r in results:
        model = f"{MODEL_NAMES.get(r.model, '?')} ({r.model})"
        status = ", ".join(b.name for b in decode_error_bits(r.error)) or "ok"
        lines.append(f"{r.servo_id:>3}  {model:<14} {r.firmware:<9} {r.baudrate:>8}  {status}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True, help="serial port (e.g. /dev/ttyACM0, /dev/tty.usbmodem…)")
    parser.add_argument("--baud", type=int, nargs="+", default=None, metavar="BPS",
                        help=f"baud rates to try (default: all of {sorted(set(BAUD_RATES.values()), reverse=True)})")
    parser.add_argument("--ids", type=parse_ids, default=None, help="ids to look for, e.g. 1-6 (default 0-252)")
    parser.add_argument("--no-broadcast", action="store_true",
                        help="ping each id instead of one broadcast PING (slow; for adapters that garble collisions)")
    parser.add_argument("--timeout-ms", type=float, default=20.0, help="reply deadline per request")


def run(args: argparse.Namespace) -> int:
    bauds = args.baud or None
    try:
        with FeetechBus(args.port, bauds[0] if bauds else 1_000_000, timeout_ms=args.timeout_ms, retries=0) as bus:
            kwargs = {"ids": args.ids} if args.ids else {}
            results = bus.scan(baudrates=bauds, broadcast=not args.no_broadcast, **kwargs)
    except DriverError as err:
        print(f"so101 scan: error: {err}", file=sys.stderr)
        return 1
    if not results:
        print(f"no servo answered on {args.port} (check power, cable and baud rate)")
        return 1
    print(format_table(results))
    return 0
