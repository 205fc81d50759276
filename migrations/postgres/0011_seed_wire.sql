-- The display name a lease was acquired with (issue 38: the names-and-leases seed
-- sends `display_name`, "My Agent"; its canonical name is `name`).
ALTER TABLE leases ADD COLUMN display_name TEXT;
