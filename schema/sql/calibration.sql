-- name: ocr_calibration_upsert
-- A worker host's start-up measure of OCR: one page's seconds at the resolution it reads pages at.
INSERT INTO ocr_calibrations (host, seconds_per_page, dpi, measured_at)
VALUES (%(host)s, %(seconds_per_page)s, %(dpi)s, coalesce(%(now)s, now()))
ON CONFLICT (host) DO UPDATE SET seconds_per_page = excluded.seconds_per_page, dpi = excluded.dpi,
                                 measured_at = excluded.measured_at;

-- name: ocr_calibration_latest_one
-- The newest measure of any host: the prior a forecast uses for scans before any has run.
SELECT host, seconds_per_page, dpi, measured_at FROM ocr_calibrations ORDER BY measured_at DESC LIMIT 1;
