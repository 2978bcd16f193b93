"""What tma1 keeps of a hook event, and in what form: text every database can store
(`text`), each field capped to its budget (`caps`), the event made storable in place on
every path in (`scrub`), the line ranges an edit wrote (`editlines`), and caches of what is
derived from a text that never hold the whole text (`textmemo`)."""
