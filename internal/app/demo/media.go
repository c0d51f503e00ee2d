package demo

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
)

// pixelPNG returns a 1x1 red PNG, the image of the image fixtures.
func pixelPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 0xff, A: 0xff})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic("demo: encode PNG: " + err.Error()) // cannot happen with an in-memory image
	}
	return b.Bytes()
}

// silenceWAV returns 10 ms of 8 kHz mono 16-bit PCM silence as a WAV
// file, the audio of the audio fixture.
func silenceWAV() []byte {
	const (
		rate     = 8000
		channels = 1
		bits     = 16
		samples  = rate / 100
		dataLen  = samples * channels * bits / 8
	)
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) } // bytes.Buffer never fails
	b.WriteString("RIFF")
	w(uint32(36 + dataLen))
	b.WriteString("WAVEfmt ")
	w(uint32(16)) // fmt chunk size
	w(uint16(1))  // PCM
	w(uint16(channels))
	w(uint32(rate))
	w(uint32(rate * channels * bits / 8)) // byte rate
	w(uint16(channels * bits / 8))        // block align
	w(uint16(bits))
	b.WriteString("data")
	w(uint32(dataLen))
	b.Write(make([]byte, dataLen))
	return b.Bytes()
}
