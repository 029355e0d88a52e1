# github/label-delete: the output document
{deleted: true, name}
