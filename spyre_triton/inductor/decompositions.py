"""Convolution and its backward on spyre as im2col + matmul (installed into Inductor's
decomposition table by `compat.add_spyre_decompositions`)."""
from __future__ import annotations

from .device import DEVICE

# --- convolution as im2col + matmul --------------------------------------------------------------
#
# Inductor lowers aten.convolution to an extern aten call unless max-autotune offers its conv
# template, and convolution_backward always to an extern call: on spyre both would run on the
# host. For spyre tensors the decompositions below, added to Inductor's decomposition table by
# compat.add_spyre_decompositions (the table is applied while AOTAutograd traces the
# graph, so forward and backward are covered), rewrite a
# 1-D or 2-D convolution (any stride, padding, dilation, groups; transposed too) as an im2col
# gather, a matmul that becomes the Triton mm/bmm template, and, for the gradient of the input, a
# col2im sum of shifted copies (pointwise, no atomics). Other devices, and 3-D convolutions,
# keep Inductor's behaviour (NotImplemented defers to it).

def _conv_geometry(w, stride, padding, dilation):
    nd = w.dim() - 2
    return [list(v) * nd if len(v) == 1 else list(v) for v in (stride, padding, dilation)]


def _im2col(x, kh, kw, stride, padding, dilation, groups):
    """x (N, C, H, W) -> columns (G, C/G*kh*kw, N*oh*ow), and (oh, ow)."""
    import torch.nn.functional as F
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c = x.shape[0], x.shape[1]
    if ph or pw:
        x = F.pad(x, (pw, pw, ph, ph))
    # (N, C, oh, ow, kh_span, kw_span), then every dilation-th kernel tap: (N, C, oh, ow, kh, kw)
    patches = x.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)[..., ::dh, ::dw]
    oh, ow = patches.shape[2], patches.shape[3]
    cols = patches.reshape(n, groups, c // groups, oh, ow, kh, kw).permute(1, 2, 5, 6, 0, 3, 4)
    return cols.reshape(groups, c // groups * kh * kw, n * oh * ow), oh, ow


def _col2im(cols, n, c, size, kh, kw, oh, ow, stride, padding, dilation, groups):
    """The adjoint of _im2col: columns (G, C/G*kh*kw, N*oh*ow) -> (N, C, H, W) with H, W = size,
    each input position summing the columns that read it. Built from pads of strided copies, so
    Inductor fuses it into one pointwise kernel."""
    import torch.nn.functional as F
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    hp, wp = size[0] + 2 * ph, size[1] + 2 * pw  # the padded input that _im2col read
    taps = cols.reshape(groups, c // groups, kh, kw, n, oh, ow).permute(4, 0, 1, 2, 3, 5, 6)
    taps = taps.reshape(n, c, kh, kw, oh, ow)
    total = None
    for i in range(kh):
        for j in range(kw):
            t = taps[:, :, i, j]
            if sh > 1 or sw > 1:  # spread the rows/columns `stride` apart
                t = F.pad(t[:, :, :, None, :, None], (0, sw - 1, 0, 0, 0, sh - 1))
                t = t.reshape(n, c, oh * sh, ow * sw)[:, :, :sh * (oh - 1) + 1, :sw * (ow - 1) + 1]
            top, left = i * dh, j * dw
            t = F.pad(t, (left, wp - left - (sw * (ow - 1) + 1), top, hp - top - (sh * (oh - 1) + 1)))
            total = t if total is None else total + t
    return total[:, :, ph:ph + size[0], pw:pw + size[1]]


def _as_2d(nd, *tensors):
    return [t.unsqueeze(2) if nd == 1 else t for t in tensors]


def _matmul_groups(a, b):
    """(G, M, K) @ (G, K, N): an mm when there is one group, else a bmm."""
    import torch
    return torch.mm(a[0], b[0]).unsqueeze(0) if a.shape[0] == 1 else torch.bmm(a, b)


def _spyre_conv_applies(x, w) -> bool:
    return x.device.type == DEVICE and w.dim() in (3, 4) and x.dim() == w.dim() and x.dtype.is_floating_point


def spyre_convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """aten.convolution on spyre as im2col + matmul (transposed: matmul + col2im)."""
    if not _spyre_conv_applies(x, w):
        return NotImplemented
    nd = w.dim() - 2
    stride, padding, dilation = _conv_geometry(w, stride, padding, dilation)
    output_padding = list(output_padding) * nd if len(output_padding) == 1 else list(output_padding)
    if nd == 1:
        stride, padding, dilation, output_padding = ([1, *stride], [0, *padding], [1, *dilation],
                                                     [0, *output_padding])
    x, w = _as_2d(nd, x, w)
    n, g = x.shape[0], groups
    kh, kw = w.shape[2], w.shape[3]
    if not transposed:
        out_ch = w.shape[0]
        cols, oh, ow = _im2col(x, kh, kw, stride, padding, dilation, g)
        out = _matmul_groups(w.reshape(g, out_ch // g, -1), cols)  # (G, O/G, N*oh*ow)
        out = out.reshape(out_ch, n, oh, ow).permute(1, 0, 2, 3)
    else:
        # w: (Cin, Cout/G, kh, kw); the output is the input-gradient of a convolution by w.
        cin, h, wd = x.shape[1], x.shape[2], x.shape[3]
        out_ch = w.shape[1] * g
        size = [(h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1,
                (wd - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1]
        xg = x.reshape(n, g, cin // g, h * wd).permute(1, 2, 0, 3).reshape(g, cin // g, n * h * wd)
        wg = w.reshape(g, cin // g, -1).transpose(1, 2)  # (G, Cout/G*kh*kw, Cin/G)
        out = _col2im(_matmul_groups(wg, xg), n, out_ch, size, kh, kw, h, wd, stride, padding,
                      dilation, g)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    out = out.contiguous()
    return out.squeeze(2) if nd == 1 else out


def spyre_convolution_backward(inductor_decomp, grad_out, x, w, bias_sizes, stride, padding, dilation,
                               transposed, output_padding, groups, output_mask):
    """aten.convolution_backward on spyre from the same pieces (else Inductor's decomposition)."""
    if not _spyre_conv_applies(x, w):
        if inductor_decomp is None:
            return NotImplemented
        return inductor_decomp(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed,
                               output_padding, groups, output_mask)
    nd = w.dim() - 2
    stride, padding, dilation = _conv_geometry(w, stride, padding, dilation)
    if nd == 1:
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
    grad_out, x, w = _as_2d(nd, grad_out, x, w)
    n, g = x.shape[0], groups
    kh, kw = w.shape[2], w.shape[3]
    grad_x = grad_w = grad_b = None
    if output_mask[2]:
        grad_b = grad_out.sum([0, 2, 3])
    if not transposed:
        out_ch, oh, ow = grad_out.shape[1], grad_out.shape[2], grad_out.shape[3]
        go = grad_out.permute(1, 0, 2, 3).reshape(g, out_ch // g, n * oh * ow)
        if output_mask[1]:
            cols = _im2col(x, kh, kw, stride, padding, dilation, g)[0]
            grad_w = _matmul_groups(go, cols.transpose(1, 2)).reshape(w.shape)
        if output_mask[0]:
            gcols = _matmul_groups(w.reshape(g, out_ch // g, -1).transpose(1, 2), go)
            grad_x = _col2im(gcols, n, x.shape[1], [x.shape[2], x.shape[3]], kh, kw, oh, ow, stride,
                             padding, dilation, g)
    else:
        # The forward was a col2im of w^T @ x; its adjoints are im2col of grad_out.
        cin, h, wd = x.shape[1], x.shape[2], x.shape[3]
        cols = _im2col(grad_out, kh, kw, stride, padding, dilation, g)[0]  # (G, Cout/G*k, N*h*w)
        if output_mask[0]:
            gx = _matmul_groups(w.reshape(g, cin // g, -1), cols)  # (G, Cin/G, N*h*w)
            grad_x = gx.reshape(cin, n, h, wd).permute(1, 0, 2, 3)
        if output_mask[1]:
            xg = x.reshape(n, g, cin // g, h * wd).permute(1, 2, 0, 3).reshape(g, cin // g, n * h * wd)
            grad_w = _matmul_groups(xg, cols.transpose(1, 2)).reshape(w.shape)
    if grad_x is not None:
        grad_x = grad_x.contiguous()
        grad_x = grad_x.squeeze(2) if nd == 1 else grad_x
    if grad_w is not None and nd == 1:
        grad_w = grad_w.squeeze(2)
    return grad_x, grad_w, grad_b


# --- batch norm in inference: the statistics outputs as spyre's eager gives them ------------------
#
# In inference (training=False) aten.native_batch_norm and its _legit forms return empty "saved"
# statistics on the CPU, but the running mean and 1/std on CUDA. torch's decomposition picks by
# `input.device.type != "cpu"`, so on spyre it gives CUDA's shapes ([C]) while spyre's eager ops,
# which run the CPU kernels, give [0]: a compiled graph would then not match eager. For spyre inputs
# in inference the statistics outputs are made empty, as eager's; everything else is unchanged.

def spyre_batch_norm_inference(decomp, training_arg, *args, **kwargs):
    """Wraps torch's decomposition `decomp` of a batch-norm op; `training_arg` is the position of its
    `training` argument (None: the op is always inference)."""
    out = decomp(*args, **kwargs)
    x = args[0]
    if training_arg is None:
        training = False
    else:
        training = args[training_arg] if len(args) > training_arg else kwargs["training"]
    if x.device.type != DEVICE or training:
        return out
    return (out[0], x.new_zeros((0,)), x.new_zeros((0,)), *out[3:])  # _functional: + new running stats
