# github/gist-delete: the output document
{deleted: true, id}
