"""A GAN step with a hand-written SSIM loss and a float32 Gram-matrix style loss."""

import torch
import torch.nn.functional as F


def ssim(img1, img2, window, channels):
    mu1 = F.conv2d(img1, window, padding=5, groups=channels)
    mu2 = F.conv2d(img2, window, padding=5, groups=channels)
    mu1_sq, mu2_sq, mu1_mu2 = mu1.pow(2), mu2.pow(2), mu1 * mu2
    sigma1_sq = F.conv2d(img1 * img1, window, padding=5, groups=channels) - mu1_sq
    sigma2_sq = F.conv2d(img2 * img2, window, padding=5, groups=channels) - mu2_sq
    sigma12 = F.conv2d(img1 * img2, window, padding=5, groups=channels) - mu1_mu2
    c1, c2 = 0.01**2, 0.03**2
    ssim_map = ((2 * mu1_mu2 + c1) * (2 * sigma12 + c2)) / (
        (mu1_sq + mu2_sq + c1) * (sigma1_sq + sigma2_sq + c2)
    )
    return ssim_map.mean()


def style_loss(features, target_gram):
    n = features.shape[0]
    gram = features.float().T @ features.float() / n  # meant to be float32
    return (gram - target_gram).pow(2).mean()


def generator_step(generator, z, real, window, target_gram):
    with torch.autocast("cuda", dtype=torch.float16):
        fake = generator(z)
        loss = 1 - ssim(fake, real, window, 3)
        loss = loss + style_loss(fake.flatten(1), target_gram)
    return loss
