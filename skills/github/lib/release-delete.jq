# github/release-delete: the output document
{deleted: true, tag}
