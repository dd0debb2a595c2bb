"""Writes DICOM CT series with pydicom, and what a reader should make of them.

usage: python3 dicom_series.py SPEC.json

SPEC is a list of series, each
  {"dir", "uid", "desc", "syntax": "explicit" | "implicit" | a UID,
   "rows", "cols", "ps": [row spacing, column spacing] (strings),
   "iop": 6 strings, "ipps": [[3 strings] per slice], "signed", "bits_stored",
   "slope", "intercept" (strings), "seed", "sequence": bool,
   "expect": null or {"npy": path, "json": path, "voxels": [[i, j, k], ...]},
   and optionally "instances": [InstanceNumber per slice] and
   "cube": {"lo": [i, j, k], "size": [3], "value", "background"}}.

Slices are written under random file names, with InstanceNumbers in random
order (or "instances"), next to a file that is not DICOM. Pixels are random
stored values, or with "cube" the stored value "background" but "value" at
column i, row j of the k-th slice in order along the normal rowdir × coldir
for lo <= (i, j, k) < lo + size. For a series with "expect", the files
are read back with pydicom, ordered along the slice normal, and the rescaled
values stacked as (columns, rows, slices) float32 into "npy"; "json" gets the
world position of each voxel (i, j, k) (column i, row j of the k-th slice):
IPP_k + i * PixelSpacing[1] * rowdir + j * PixelSpacing[0] * coldir.
"""
import json
import os
import random
import sys

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileDataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, ImplicitVRLittleEndian, UID

CT_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.2"


def write_series(s):
    os.makedirs(s["dir"], exist_ok=True)
    rng = random.Random(s["seed"])
    n = len(s["ipps"])
    instances = list(range(1, n + 1))
    rng.shuffle(instances)
    if s.get("instances"):
        instances = s["instances"]
    cube = s.get("cube")
    if cube:
        iop = np.array([float(x) for x in s["iop"]])
        normal = np.cross(iop[:3], iop[3:])
        along = np.argsort([np.dot([float(x) for x in p], normal) for p in s["ipps"]])
        rank = {int(slice_): r for r, slice_ in enumerate(along)}
    syntax = {"explicit": ExplicitVRLittleEndian, "implicit": ImplicitVRLittleEndian}.get(s["syntax"], s["syntax"])
    lo, hi = (-(1 << (s["bits_stored"] - 1)), (1 << (s["bits_stored"] - 1)) - 1) if s["signed"] else (0, (1 << s["bits_stored"]) - 1)
    for k, ipp in enumerate(s["ipps"]):
        sop = "1.2.826.0.1.3680043.8.498.%d.%d" % (s["seed"], k + 1)
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CT_IMAGE_STORAGE
        meta.MediaStorageSOPInstanceUID = sop
        meta.TransferSyntaxUID = UID(syntax)
        meta.ImplementationClassUID = "1.2.826.0.1.3680043.8.498.1"
        name = "%08x" % rng.getrandbits(32)
        path = os.path.join(s["dir"], name if k % 2 else name + ".dcm")
        ds = FileDataset(path, {}, file_meta=meta, preamble=b"\0" * 128)
        ds.is_little_endian = True
        ds.is_implicit_VR = syntax == ImplicitVRLittleEndian
        ds.SOPClassUID = CT_IMAGE_STORAGE
        ds.SOPInstanceUID = sop
        ds.Modality = "CT"
        ds.SeriesDescription = s["desc"]
        if s.get("sequence"):
            item = Dataset()
            item.ReferencedSOPClassUID = CT_IMAGE_STORAGE
            item.ReferencedSOPInstanceUID = sop + ".9"
            ds.ReferencedImageSequence = Sequence([item])
            ds["ReferencedImageSequence"].is_undefined_length = True
            item.is_undefined_length_sequence_item = True
        ds.SeriesInstanceUID = s["uid"]
        ds.InstanceNumber = instances[k]
        ds.ImagePositionPatient = ipp
        ds.ImageOrientationPatient = s["iop"]
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = "MONOCHROME2"
        ds.Rows = s["rows"]
        ds.Columns = s["cols"]
        ds.PixelSpacing = s["ps"]
        ds.BitsAllocated = 16
        ds.BitsStored = s["bits_stored"]
        ds.HighBit = s["bits_stored"] - 1
        ds.PixelRepresentation = 1 if s["signed"] else 0
        ds.RescaleIntercept = s["intercept"]
        ds.RescaleSlope = s["slope"]
        if cube:
            px = np.full((s["rows"], s["cols"]), cube["background"], dtype="<i2" if s["signed"] else "<u2")
            (i0, j0, k0), (ni, nj, nk) = cube["lo"], cube["size"]
            if k0 <= rank[k] < k0 + nk:
                px[j0:j0 + nj, i0:i0 + ni] = cube["value"]
        else:
            px = np.array([rng.randint(lo, hi) for _ in range(s["rows"] * s["cols"])], dtype="<i2" if s["signed"] else "<u2")
        if syntax in (ExplicitVRLittleEndian, ImplicitVRLittleEndian):
            ds.PixelData = px.tobytes()
        else:
            ds.PixelData = pydicom.encaps.encapsulate([px.tobytes()])
            ds["PixelData"].is_undefined_length = True
            ds["PixelData"].VR = "OB"
        ds.save_as(path, write_like_original=False)
    with open(os.path.join(s["dir"], "notes.txt"), "w") as f:
        f.write("not a DICOM file\n" * 20)


def expect(s):
    e = s["expect"]
    dss = []
    for name in os.listdir(s["dir"]):
        p = os.path.join(s["dir"], name)
        try:
            ds = pydicom.dcmread(p)
        except pydicom.errors.InvalidDicomError:
            continue
        if ds.SeriesInstanceUID == s["uid"]:
            dss.append(ds)
    iop = np.array([float(x) for x in dss[0].ImageOrientationPatient])
    row, col = iop[:3], iop[3:]
    normal = np.cross(row, col)
    dss.sort(key=lambda d: float(np.dot([float(x) for x in d.ImagePositionPatient], normal)))
    planes = [(d.pixel_array.astype(np.float64) * float(d.RescaleSlope) + float(d.RescaleIntercept)).astype(np.float32) for d in dss]
    vol = np.ascontiguousarray(np.stack(planes, axis=-1).transpose(1, 0, 2))
    np.save(e["npy"], vol)
    ps = [float(x) for x in dss[0].PixelSpacing]
    world = []
    for i, j, k in e["voxels"]:
        ipp = np.array([float(x) for x in dss[k].ImagePositionPatient])
        world.append(list(ipp + i * ps[1] * row + j * ps[0] * col))
    with open(e["json"], "w") as f:
        json.dump({"world": world, "shape": list(vol.shape)}, f)


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    for s in spec:
        write_series(s)
    for s in spec:
        if s.get("expect"):
            expect(s)


main()
