'use strict';
// Preloaded into s3rver by test_s3.py (`node --require`), with the path of s3rver's
// lib/stores/filesystem.js in VDN_S3RVER_FILESYSTEM_STORE.
//
// Why: s3rver 3.7.1's FilesystemStore.putObject and putPart resolve once the hashing
// Transform has seen the last byte, not once the file WriteStream piped behind it has
// written it. So s3rver can answer 200 to a PUT (or to a part) while the object's file is
// still missing, empty or short; a HEAD, GET or listing right after then reports the
// wrong size, and a completion can concatenate a short part. Unloaded this happens about
// once in 1500 PUTs; with both cores busy (ctest -j2) often enough to fail the suite.
// Real S3 has read-after-write consistency, so the test server must too: the versions
// below resolve only after the file is written and closed. Everything else is s3rver's.
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Readable, Transform } = require('stream');
const { pipeline } = require('stream/promises');

const storePath = process.env.VDN_S3RVER_FILESYSTEM_STORE;
if (!storePath) throw new Error('s3rver_durable.js: VDN_S3RVER_FILESYSTEM_STORE is not set');
const FilesystemStore = require(storePath);
for (const name of ['putObject', 'putPart', 'getResourcePath', 'putMetadata']) {
  if (typeof FilesystemStore.prototype[name] !== 'function') {
    throw new Error(`s3rver_durable.js: ${storePath} has no FilesystemStore.${name} ` +
                    '(another s3rver version?)');
  }
}

// Streams `content` (a Readable or a Buffer) into `file`. Resolves with the byte count and
// MD5 (hex) only after the write stream has finished, i.e. every byte is in the file.
async function writeWhole(file, content) {
  await fs.promises.mkdir(path.dirname(file), { recursive: true });
  const md5 = crypto.createHash('md5');
  let size = 0;
  const count = new Transform({
    transform(chunk, encoding, done) {
      md5.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  const source = Buffer.isBuffer(content) ? Readable.from([content]) : content;
  await pipeline(source, count, fs.createWriteStream(file));
  return { size, md5: md5.digest('hex') };
}

FilesystemStore.prototype.putObject = async function putObject(object) {
  const file = this.getResourcePath(object.bucket, object.key, 'object');
  const { size, md5 } = await writeWhole(file, object.content);
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size, md5 };
};

FilesystemStore.prototype.putPart = async function putPart(bucket, uploadId, partNumber,
                                                           content) {
  const uploads = this.getResourcePath(bucket, undefined, 'uploads');
  const file = path.join(uploads, uploadId, String(partNumber));
  const { size, md5 } = await writeWhole(file, content);
  await fs.promises.writeFile(`${file}.md5`, md5);
  return { size, md5 };
};

process.stderr.write('s3rver_durable.js: putObject/putPart answer after the file is written\n');
