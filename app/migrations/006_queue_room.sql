-- 006: a queued run that failed for room (a full disk) waits for room (issue 33/37): the
-- bytes it needs free on the disk holding the lab's runs before it starts again (its
-- checkpoint saved twice over, with a margin; app/queue/retry.py). NULL: it waits for
-- nothing but its turn. Its retry is not spent by the wait.
ALTER TABLE queue_items ADD COLUMN room_bytes INTEGER;
