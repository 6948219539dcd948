"""`objstore://`, an in-memory object store with gs:// and s3://'s semantics through Beam, for tests that read or
write remote folders: keys only, a "folder" is a key prefix (no directories, nothing to make), an object appears
whole when its upload closes, and a rename is a copy then a delete. Beam finds it by its scheme, as a subclass of
its FileSystem: importing this module registers it. Tests start from `ObjectStore.objects = {...}`."""

import io

from apache_beam.io.filesystem import FileMetadata, FileSystem


class _Upload(io.BytesIO):
    """A write stream whose object is stored when it closes, as an object store's upload is."""

    def __init__(self, objects: dict[str, bytes], path: str):
        super().__init__()
        self.objects, self.path = objects, path

    def close(self):
        if not self.closed:
            self.objects[self.path] = self.getvalue()
        super().close()


class ObjectStore(FileSystem):
    objects: dict[str, bytes] = {}

    @classmethod
    def scheme(cls):
        return "objstore"

    def join(self, base, *parts):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])

    def split(self, path):
        head, _, tail = path.rpartition("/")
        return head, tail

    def has_dirs(self):
        return False

    def _list(self, prefix):
        return [self.metadata(k) for k in sorted(self.objects) if k.startswith(prefix)]

    def exists(self, path):
        return path in self.objects

    def metadata(self, path):
        return FileMetadata(path, len(self.objects[path]))

    def size(self, path):
        return len(self.objects[path])

    def open(self, path, mime_type=None, compression_type=None):
        return io.BytesIO(self.objects[path])

    def create(self, path, mime_type=None, compression_type=None):
        return _Upload(self.objects, path)

    def mkdirs(self, path):
        pass  # no folders: a key's prefix is its folder

    def copy(self, source_file_names, destination_file_names):
        for source, destination in zip(source_file_names, destination_file_names):
            self.objects[destination] = self.objects[source]

    def rename(self, source_file_names, destination_file_names):
        self.copy(source_file_names, destination_file_names)
        self.delete(source_file_names)

    def delete(self, paths):
        for path in paths:
            del self.objects[path]

    def _unsupported(self, *args, **kwargs):
        raise NotImplementedError("objstore:// keeps no timestamps or checksums")

    last_updated = checksum = _unsupported


def objects_under(folder: str) -> dict[str, bytes]:
    """The objects under `folder`, by their key relative to it."""
    prefix = folder.rstrip("/") + "/"
    return {key[len(prefix) :]: data for key, data in sorted(ObjectStore.objects.items()) if key.startswith(prefix)}
