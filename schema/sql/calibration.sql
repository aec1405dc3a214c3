-- name: ocr_calibration_upsert
-- A worker host's start-up measure: one scanned page's OCR seconds at the resolution it reads pages
-- at, and a text document's seconds through the agent's path (a base and a rate a page; NULL: not
-- measured).
INSERT INTO ocr_calibrations (host, seconds_per_page, dpi, measured_at, text_seconds_base, text_seconds_per_page,
                              cpu_seconds_per_page)
VALUES (%(host)s, %(seconds_per_page)s, %(dpi)s, coalesce(%(now)s, now()), %(text_seconds_base)s,
        %(text_seconds_per_page)s, %(cpu_seconds_per_page)s)
ON CONFLICT (host) DO UPDATE SET seconds_per_page = excluded.seconds_per_page, dpi = excluded.dpi,
                                 measured_at = excluded.measured_at,
                                 text_seconds_base = excluded.text_seconds_base,
                                 text_seconds_per_page = excluded.text_seconds_per_page,
                                 cpu_seconds_per_page = excluded.cpu_seconds_per_page;

-- name: ocr_calibration_latest_one
-- The newest measure of any host: the prior a forecast uses for scans before any has run.
SELECT host, seconds_per_page, dpi, measured_at, text_seconds_base, text_seconds_per_page, cpu_seconds_per_page
FROM ocr_calibrations ORDER BY measured_at DESC LIMIT 1;
