-- A scan's OCR work, counted at upload from its lines of text (agents/scanwork.py), in standard
-- pages: a page of 30 lines is one, a blank page 0.2. Tesseract's time follows the text on a page,
-- not the page: forecasts learn and count a scan's seconds on this instead of its pages.
-- NULL: a document with a text layer, or a scan from before this measure (its pages stand).
-- OCR calibrations are now taken per standard page: those taken per page are dropped, so each
-- worker measures again at start.

ALTER TABLE tasks ADD COLUMN ocr_work real CHECK (ocr_work >= 0);

DELETE FROM ocr_calibrations;
