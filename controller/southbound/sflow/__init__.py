"""sFlow: datagrams decoded (``decoder``), agents mapped to switch ports (``agents``), duplicates and gaps found
(``sequence``), flow samples turned into rates at host-facing ingress ports (``ingest``), counter samples into
link loads (``counters``), the UDP collector (``collector``) and what the core reads of it each window
(``detection``)."""
