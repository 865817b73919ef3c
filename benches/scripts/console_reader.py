"""A reader browsing the console for the console benchmark (benches/scripts/console_pages.sh):
fetches each PATH in turn, then sleeps PAUSE seconds, until killed (SIGTERM: it prints
how many pages it fetched, and the rate). One process, one
connection per page (the console closes each), so the figures carry no process start-ups.

usage: python3 console_reader.py HOST:PORT PAUSE PATH...
"""

import http.client
import signal
import sys
import time

host, pause, paths = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
pages, started = 0, time.monotonic()


def report(*_):
    seconds = time.monotonic() - started
    print(f"reader: {pages} pages in {seconds:.1f} s, {pages / seconds:.1f} pages/s", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, report)
while True:
    for path in paths:
        connection = http.client.HTTPConnection(host, timeout=10)
        try:
            connection.request("GET", path)
            connection.getresponse().read()
            pages += 1
        except OSError:
            pass
        finally:
            connection.close()
    time.sleep(pause)
