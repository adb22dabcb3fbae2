"""Record and replay on crawls' side: storing a job's recording (recordings.py) and running a version against it
(runs.py); the Scrapy side is runtime/replay."""
