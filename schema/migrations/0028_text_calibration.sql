-- A worker's start-up measure now times text documents as well as OCR: the agent's own path over
-- the bundled samples (read, classify, extract; no model call), as seconds a document and a page.
-- Forecasts read them, with a prior for the model's answer, until an agent has runs of its own.
-- OCR's CPU seconds a page are kept beside its wall seconds: their ratio says how much the machine's
-- other work slowed the measure, and a run's launch and report are slowed as much.
-- NULL: not measured (a worker from before this measure; for OCR, a machine without Tesseract,
-- which still measures text).

ALTER TABLE ocr_calibrations
    ALTER COLUMN seconds_per_page DROP NOT NULL,
    ADD COLUMN text_seconds_base double precision CHECK (text_seconds_base >= 0),
    ADD COLUMN text_seconds_per_page double precision CHECK (text_seconds_per_page >= 0),
    ADD COLUMN cpu_seconds_per_page double precision CHECK (cpu_seconds_per_page > 0);
