-- Every reply in flight is recorded from before its first write (architecture §7 "Store", §9):
-- message_id is '' until the first message is sent; message_ids lists the reply's messages
-- (JSON, in the order sent); reply_to is the user's message it answers, for a reply cut before
-- its first message.
ALTER TABLE drafts ADD COLUMN message_ids TEXT NOT NULL DEFAULT '[]';
ALTER TABLE drafts ADD COLUMN reply_to TEXT;
