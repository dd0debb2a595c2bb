#!/usr/bin/env python3
"""The wavelet sweep's reference: a NumPy/CuPy program's own code (NumPy for
CuPy, in 3-D, on its grid and in its meshgrid order, convolving as
scipy.ndimage.convolve does, by FFT) for a few combinations of its own lists
(theta, phi in arange(0, pi, pi/100), xi in arange(0, 20), a = 1), against
the rows of tapeloop's CSV of the whole sweep:

    tapeloop wavelet --volume v.npy --theta 0:pi:100 --phi 0:pi:100 --xi 0:20:20 \
      --reach volume --indexing xy --kernel "$SKERN3" \
      --stat 'wt_max=max(g)/sqrt(xi^2 + 2*a^2)' --out sweep.csv
    python3 wavelet_seed_reference.py v.npy sweep.csv

with $SKERN3 the program's function as docs/wavelet.md writes it for a 64³
volume. Prints, per row, tapeloop's statistics beside the program's and the
largest relative difference.
"""
import numpy as np, sys, csv
from scipy import signal
def skern3(x, y, z, a, theta, phi, xi):
    x = x - np.max(x)/2
    y = y - np.max(y)/2
    z = z - np.max(z)/2
    rT = x*np.cos(phi)*np.cos(theta) - y*np.sin(theta) + z*np.sin(phi)*np.cos(theta)
    rp = x*np.cos(phi)*np.sin(theta) + y*np.cos(theta) + z*np.sin(phi)*np.sin(theta)
    rp2 = -1*x*np.sin(phi) + z*np.cos(phi)
    A = (3-(rp/a)**2 - (1/xi**2)*(rT/a)**2 - (rp2/a)**2)
    B = np.exp((-1/2)*((rp/a)**2 + (1/xi**2)*(rT/a)**2 + (rp2/a)**2))
    return A*B
def convolve(v, k):  # scipy.ndimage.convolve(v, k), reflect, by FFT
    pad = [(m - 1 - m//2, m//2) for m in k.shape]
    return signal.fftconvolve(np.pad(v, pad, mode="symmetric"), k, mode="valid")
fib = np.load(sys.argv[1])
w, h, l = fib.shape
x = np.uint16(np.linspace(0, w, w)); y = np.uint16(np.linspace(0, h, h)); z = np.uint16(np.linspace(0, l, l))
x, y, z = np.meshgrid(x, y, z)
theta_list = np.arange(0, np.pi, np.pi/100); phi_list = theta_list; xi_list = np.arange(0, 20, 1); a = 1
energy_const = 1/np.sqrt(xi_list**2 + 2*a**2)
rows = list(csv.reader(open(sys.argv[2])))
hdr, rows = rows[0], rows[1:]
print("rows in the sweep:", len(rows), "columns:", ",".join(hdr))
nan = sum(1 for r in rows if r[3] == "NaN")
print("NaN rows:", nan)
for (i, j, k) in [(0, 0, 1), (37, 81, 19), (99, 3, 7), (50, 50, 2), (12, 64, 13), (5, 5, 0)]:
    r = rows[(i*100 + j)*20 + k]
    got = [float(v) for v in (r[3], r[4], r[5], r[7])]
    if xi_list[k] == 0:
        print(f"θ[{i}] φ[{j}] ξ={k}: tapeloop {got}; the author's kernel has 1/ξ² = inf: NaN")
        continue
    G = convolve(fib.astype(np.float64), skern3(x, y, z, a, theta_list[i], phi_list[j], xi_list[k]))
    want = [np.sum(np.abs(G)**2), np.sqrt(np.var(G)), np.max(G), np.max(energy_const[k]*G)]
    rel = max(abs(g - w_)/abs(w_) for g, w_ in zip(got, want))
    print(f"θ[{i}]={theta_list[i]:.4f} φ[{j}]={phi_list[j]:.4f} ξ={k}: energy {got[0]:.8g} vs {want[0]:.8g}, std {got[1]:.7g} vs {want[1]:.7g}, max {got[2]:.7g} vs {want[2]:.7g}, weighted max {got[3]:.7g} vs {want[3]:.7g}; max rel diff {rel:.2g}")
